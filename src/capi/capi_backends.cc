// The C API: The backend registry through the C API: listing backends and loading plug-ins. Nothing here throws (guarded).
#include "capi/capi_internal.h"

using namespace tessera::capi;  // NOLINT: the shared helpers

extern "C" {

size_t tsr_backend_count(void) {
  try {
    return tessera::all_backends().size();
  } catch (...) {
    return tessera::loaded_backends().size();
  }
}

tsr_status* tsr_backend_info(size_t index, const char** out_name, const char** out_description,
                             int32_t* out_used_by_default) {
  return guarded([&] {
    const std::vector<const tessera::BackendEntry*> entries = tessera::all_backends();
    if (index >= entries.size()) tessera::throw_user_error("backend index ", index, " out of range (", entries.size(), " backends)");
    if (out_name) *out_name = entries[index]->name.c_str();
    if (out_description) *out_description = entries[index]->description.c_str();
    if (out_used_by_default) *out_used_by_default = entries[index]->used_by_default ? 1 : 0;
  });
}

tsr_status* tsr_backend_get_details(size_t index, tsr_backend_details* out_details) {
  if (!out_details) return null_argument("out_details");
  if (out_details->struct_size < offsetof(tsr_backend_details, description) + sizeof(out_details->description)) {
    return make_status(TSR_INVALID_ARGUMENT, "tsr_backend_details.struct_size is too small");
  }
  return guarded([&] {
    const std::vector<const tessera::BackendEntry*> entries = tessera::all_backends();
    if (index >= entries.size()) tessera::throw_user_error("backend index ", index, " out of range (", entries.size(), " backends)");
    const tessera::BackendEntry& entry = *entries[index];
    // A built-in backend's version is asked of an instance, once per process.
    static std::mutex mutex;
    static std::map<std::string, std::string>* versions = new std::map<std::string, std::string>();
    const char* version = entry.plugin_version.c_str();
    if (entry.plugin_path.empty()) {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = versions->find(entry.name);
      if (it == versions->end()) it = versions->emplace(entry.name, entry.make(tessera::RegionOptions{})->version()).first;
      version = it->second.c_str();
    }
    tsr_backend_details d{};
    d.struct_size = out_details->struct_size;
    d.name = entry.name.c_str();
    d.description = entry.description.c_str();
    d.version = version;
    d.used_by_default = entry.used_by_default ? 1 : 0;
    d.is_fallback = entry.is_fallback ? 1 : 0;
    d.plugin_path = entry.plugin_path.c_str();
    d.plugin_abi = entry.plugin_abi.c_str();
    std::memcpy(out_details, &d, std::min(out_details->struct_size, sizeof(d)));
  });
}

tsr_status* tsr_load_backend_plugin(const char* path, const char** out_name) {
  if (!path) return null_argument("path");
  return guarded([&] {
    const tessera::BackendEntry& entry = tessera::load_backend_plugin(path);
    if (out_name) *out_name = entry.name.c_str();
  });
}

}  // extern "C"
