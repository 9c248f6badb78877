// The backends this process knows, in priority order: backend plug-ins
// loaded at run time (load_backend_plugin, or the TESSERA_BACKEND_PLUGINS
// environment variable), in the order they were loaded, then the backends
// built into Tessera. The runtime and the C API choose backends by name from
// here; nothing else lists them.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace tessera {

struct BackendEntry {
  std::string name;
  /// Used when the caller names no backends. The test backend is not: it
  /// exists to exercise partitioning, copies and artifacts.
  bool used_by_default = true;
  std::string description;
  std::function<std::unique_ptr<Backend>(const RegionOptions&)> make;
  /// The backend every op can fall back to (native): added last unless the
  /// caller is strict, and the one that runs guarded regions' fallbacks.
  bool is_fallback = false;
  /// Plug-ins only: the library's path, the backend's version and the plug-in ABI it was built for ("1.0").
  std::string plugin_path;
  std::string plugin_version;
  std::string plugin_abi;
};

/// Every backend, highest priority first (plug-ins, then the built-in ones;
/// native, the fallback, last). Entries live as long as the process.
/// Throws the error of a plug-in that TESSERA_BACKEND_PLUGINS names and that
/// failed to load, on this call and every later one.
std::vector<const BackendEntry*> all_backends();

/// The same without reading TESSERA_BACKEND_PLUGINS first (never throws).
std::vector<const BackendEntry*> loaded_backends();

/// "xnnpack (plug-in), dnnl, test, native" for messages (the loaded ones).
std::string known_backend_names();

/// The entry named `name`, or null.
const BackendEntry* find_backend(const std::string& name);

/// The fallback backend's entry (native).
const BackendEntry& fallback_backend();

/// Loads a backend plug-in (include/tessera/backend_plugin.h) for the rest of
/// the process and returns its entry. Loading the same path again returns the
/// entry it made; a name taken by a built-in backend or another plug-in is a
/// user error, as is anything open_plugin_library refuses. Thread-safe.
const BackendEntry& load_backend_plugin(const std::string& path);

}  // namespace tessera
