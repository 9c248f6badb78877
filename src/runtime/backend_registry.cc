#include "runtime/backend_registry.h"

#include <filesystem>
#include <system_error>

#include <cstdlib>
#include <deque>
#include <mutex>

#include "backends/dnnl/dnnl_backend.h"
#include "backends/native/native_backend.h"
#include "backends/plugin/plugin_backend.h"
#include "backends/testing/test_backend.h"
#include "ir/error.h"

namespace tessera {
namespace {

const std::vector<BackendEntry>& built_in_backends() {
  static const std::vector<BackendEntry> entries = {
      {"dnnl", true, "oneDNN 2.6: convolutions, matmuls, pooling, normalisation with fused post-ops and blocked layouts",
       [](const RegionOptions&) { return make_dnnl_backend(); }},
      {"test", false, "test backend: a few float32 ops in its own (scrambled) memory space",
       [](const RegionOptions&) { return make_test_backend(); }},
      {"native", true, "Tessera's own CPU kernels; runs every op", [](const RegionOptions&) { return make_native_backend(); },
       /*is_fallback=*/true},
  };
  return entries;
}

struct PluginRegistry {
  std::mutex mutex;
  std::deque<BackendEntry> plugins;  // a deque: entries never move once made
  bool environment_read = false;
  std::unique_ptr<Error> environment_error;  // kept: every later use reports it again
};

PluginRegistry& registry() {
  static PluginRegistry* r = new PluginRegistry();  // never destroyed: plug-ins stay loaded
  return *r;
}

const BackendEntry& load_locked(PluginRegistry& r, const std::string& given) {
  // "" would make dlopen return the main program; a bare name would make it search the library path
  // (LD_LIBRARY_PATH, the system's folders) and load whatever it finds there first. A plug-in is a file:
  // a name without '/' is one in the current folder.
  if (given.empty()) throw_user_error("a backend plug-in path is empty");
  if (given.find('\0') != std::string::npos) throw_user_error("backend plug-in path '", given, "' holds a NUL byte");
  const std::string path = given.find('/') == std::string::npos ? "./" + given : given;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw_user_error("backend plug-in '", given, "': cannot be loaded: ",
                     std::filesystem::exists(path, ec) ? "it is not a regular file" : "no such file");
  }
  for (const BackendEntry& entry : r.plugins) {
    // The same file under another spelling (./x.so, a symbolic link, a hard link) is the same plug-in.
    if (entry.plugin_path == path || std::filesystem::equivalent(entry.plugin_path, path, ec)) return entry;
  }
  std::shared_ptr<const PluginLibrary> library = open_plugin_library(path);
  for (const BackendEntry& entry : built_in_backends()) {
    if (entry.name == library->name) {
      throw_user_error("backend plug-in '", path, "' is named '", library->name, "', the name of a built-in backend");
    }
  }
  for (const BackendEntry& entry : r.plugins) {
    if (entry.name == library->name) {
      throw_user_error("backend plug-in '", path, "' is named '", library->name, "', like the plug-in already loaded from '",
                       entry.plugin_path, "'");
    }
  }
  BackendEntry entry;
  entry.name = library->name;
  entry.description = library->description;
  entry.make = [library](const RegionOptions& options) { return make_plugin_backend(library, options); };
  entry.plugin_path = path;
  entry.plugin_version = library->version;
  entry.plugin_abi = std::to_string(library->abi_major) + "." + std::to_string(library->abi_minor);
  r.plugins.push_back(std::move(entry));
  return r.plugins.back();
}

/// TESSERA_BACKEND_PLUGINS: paths separated by ':', loaded on first use of the registry.
void read_environment_locked(PluginRegistry& r) {
  if (r.environment_error) throw *r.environment_error;
  if (r.environment_read) return;
  r.environment_read = true;
  const char* list = std::getenv("TESSERA_BACKEND_PLUGINS");
  if (!list) return;
  std::string text = list;
  for (size_t start = 0; start <= text.size();) {
    size_t colon = text.find(':', start);
    if (colon == std::string::npos) colon = text.size();
    const std::string path = text.substr(start, colon - start);
    start = colon + 1;
    if (path.empty()) continue;
    try {
      load_locked(r, path);
    } catch (const Error& e) {
      r.environment_error = std::make_unique<Error>(e.kind(), std::string("TESSERA_BACKEND_PLUGINS: ") + e.what());
      throw *r.environment_error;
    }
  }
}

}  // namespace

std::vector<const BackendEntry*> all_backends() {
  PluginRegistry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    read_environment_locked(r);
  }
  return loaded_backends();
}

std::vector<const BackendEntry*> loaded_backends() {
  PluginRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<const BackendEntry*> entries;
  for (const BackendEntry& entry : r.plugins) entries.push_back(&entry);
  for (const BackendEntry& entry : built_in_backends()) entries.push_back(&entry);
  return entries;
}

std::string known_backend_names() {
  std::string names;
  for (const BackendEntry* entry : loaded_backends()) {
    names += (names.empty() ? "" : ", ") + entry->name + (entry->plugin_path.empty() ? "" : " (plug-in)");
  }
  return names;
}

const BackendEntry* find_backend(const std::string& name) {
  for (const BackendEntry* entry : all_backends()) {
    if (entry->name == name) return entry;
  }
  return nullptr;
}

const BackendEntry& fallback_backend() {
  for (const BackendEntry& entry : built_in_backends()) {
    if (entry.is_fallback) return entry;
  }
  throw_internal_error("no fallback backend is built in");
}

const BackendEntry& load_backend_plugin(const std::string& path) {
  PluginRegistry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  read_environment_locked(r);
  return load_locked(r, path);
}

}  // namespace tessera
