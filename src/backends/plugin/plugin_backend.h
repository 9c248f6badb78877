// A Backend (src/backends/backend.h) whose work is done by a plug-in through
// the C ABI of include/tessera/backend_plugin.h. The core sees it as any other
// backend: declarations (support checks and patterns) for the partitioner,
// compile/load for the runtime, a memory space when the plug-in has one.
#pragma once
#include <memory>

#include "backends/backend.h"
#include "backends/plugin/plugin_library.h"

namespace tessera {

/// Creates the plug-in's backend object (tsrp_plugin.create_backend) with the
/// session's thread count and reads its patterns; a user error names the
/// plug-in when it fails or its patterns are malformed.
std::unique_ptr<Backend> make_plugin_backend(std::shared_ptr<const PluginLibrary> library,
                                             const RegionOptions& options);

}  // namespace tessera
