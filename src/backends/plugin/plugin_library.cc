// Opening a plug-in library and negotiating its ABI version (plugin_library.h).
#include "backends/plugin/plugin_library.h"

#include <dlfcn.h>

#include <cstring>

#include "backends/plugin/plugin_status.h"
#include "ir/error.h"

namespace tessera {
namespace {

const tsrp_host& host_table() {
  static const tsrp_host host = [] {
    tsrp_host h{};
    h.struct_size = sizeof(tsrp_host);
    h.abi_major = TSRP_ABI_MAJOR;
    h.abi_minor = TSRP_ABI_MINOR;
    h.tessera_version = "0.1";
    h.make_status = &make_plugin_status;
    return h;
  }();
  return host;
}

bool valid_name(const char* name) {
  if (!name || !(name[0] >= 'a' && name[0] <= 'z')) return false;
  for (const char* c = name; *c; ++c) {
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  }
  return std::strlen(name) <= 64;
}

}  // namespace

std::shared_ptr<const PluginLibrary> open_plugin_library(const std::string& path) {
  const std::string where = "backend plug-in '" + path + "': ";
  // RTLD_LOCAL: two plug-ins may define the same symbols; RTLD_NOW: a missing
  // symbol is an error here, not a crash in the middle of a run.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    throw_user_error(where, "cannot be loaded: ", why ? why : "unknown dlopen error");
  }
  auto entry = reinterpret_cast<tsrp_entry_point>(dlsym(handle, TSRP_ENTRY_POINT_NAME));
  if (!entry) {
    throw_user_error(where, "exports no function '", TSRP_ENTRY_POINT_NAME,
                     "' (a backend plug-in implements include/tessera/backend_plugin.h)");
  }
  const tsrp_plugin* api = entry(&host_table());
  if (!api) {
    throw_user_error(where, "declined to load into this Tessera (plug-in ABI ", TSRP_ABI_MAJOR, ".", TSRP_ABI_MINOR, ")");
  }
  if (api->struct_size < offsetof(tsrp_plugin, abi_minor) + sizeof(api->abi_minor)) {
    throw_user_error(where, "its plug-in table is ", api->struct_size, " bytes, too small to hold a version");
  }
  if (api->abi_major != TSRP_ABI_MAJOR) {
    throw_user_error(where, "was built for plug-in ABI ", api->abi_major, ".", api->abi_minor, "; this Tessera implements ABI ",
                     TSRP_ABI_MAJOR, ".", TSRP_ABI_MINOR, " (the major versions must match)");
  }
  // Every member of ABI 1.0 but serial_runs is required.
  struct Required {
    const char* name;
    bool present;
  };
  const Required required[] = {
      {"name", TSRP_HAS_MEMBER(api, tsrp_plugin, name) && api->name},
      {"version", TSRP_HAS_MEMBER(api, tsrp_plugin, version) && api->version},
      {"description", TSRP_HAS_MEMBER(api, tsrp_plugin, description) && api->description},
      {"create_backend", TSRP_HAS_MEMBER(api, tsrp_plugin, create_backend) && api->create_backend},
      {"destroy_backend", TSRP_HAS_MEMBER(api, tsrp_plugin, destroy_backend) && api->destroy_backend},
      {"compatibility", TSRP_HAS_MEMBER(api, tsrp_plugin, compatibility) && api->compatibility},
      {"memory_space", TSRP_HAS_MEMBER(api, tsrp_plugin, memory_space) && api->memory_space},
      {"support", TSRP_HAS_MEMBER(api, tsrp_plugin, support) && api->support},
      {"pattern_count", TSRP_HAS_MEMBER(api, tsrp_plugin, pattern_count) && api->pattern_count},
      {"pattern", TSRP_HAS_MEMBER(api, tsrp_plugin, pattern) && api->pattern},
      {"compile", TSRP_HAS_MEMBER(api, tsrp_plugin, compile) && api->compile},
      {"free_payload", TSRP_HAS_MEMBER(api, tsrp_plugin, free_payload) && api->free_payload},
      {"load", TSRP_HAS_MEMBER(api, tsrp_plugin, load) && api->load},
      {"release_region", TSRP_HAS_MEMBER(api, tsrp_plugin, release_region) && api->release_region},
      {"run", TSRP_HAS_MEMBER(api, tsrp_plugin, run) && api->run},
  };
  for (const Required& r : required) {
    if (!r.present) throw_user_error(where, "its plug-in table (ABI ", api->abi_major, ".", api->abi_minor, ") lacks '", r.name, "'");
  }
  if (!valid_name(api->name)) {
    throw_user_error(where, "backend name '", api->name, "' is not of the form [a-z][a-z0-9_]* (at most 64 characters)");
  }
  auto library = std::make_shared<PluginLibrary>();
  library->path = path;
  library->handle = handle;
  library->api = api;
  library->name = api->name;
  library->version = api->version;
  library->description = api->description;
  library->abi_major = api->abi_major;
  library->abi_minor = api->abi_minor;
  return library;
}

}  // namespace tessera
