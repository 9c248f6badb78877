// A backend plug-in: a shared library that exports tessera_backend_plugin
// (include/tessera/backend_plugin.h), opened once per process and never
// closed (its code may still run in regions or in static destructors).
#pragma once
#include <memory>
#include <string>

#include "tessera/backend_plugin.h"

namespace tessera {

struct PluginLibrary {
  std::string path;
  void* handle = nullptr;
  const tsrp_plugin* api = nullptr;
  std::string name;
  std::string version;
  std::string description;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
};

/// Opens `path`, negotiates the ABI version and checks the plug-in's table:
/// a user error names the path and what is wrong (no entry point, a major
/// version other than TSRP_ABI_MAJOR, a missing function, a bad name).
std::shared_ptr<const PluginLibrary> open_plugin_library(const std::string& path);

/// Reads member `m` of the plug-in's table, or `fallback` when the plug-in's
/// struct is too old to have it.
#define TSRP_MEMBER_OR(plugin, m, fallback) \
  (TSRP_HAS_MEMBER((plugin), tsrp_plugin, m) ? (plugin)->m : (fallback))

}  // namespace tessera
