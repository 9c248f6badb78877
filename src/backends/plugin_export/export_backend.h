// A C++ backend (src/backends/backend.h) behind the plug-in ABI
// (include/tessera/backend_plugin.h): the same sources built into a shared
// library that Tessera loads like any out-of-tree plug-in. Its declarations
// become support() answers, its Pattern objects become tsrp_pattern data
// (conditions written in C++ are asked back through pattern_check), its
// memory space a tsrp_memory_space, and each region's ValueStore is built over
// the DLPack tensors of run(). The test backend is built this way
// (tests/plugins/test_backend/), so the conformance and partition tests can
// run a backend through the ABI and compare it with the same backend built in.
#pragma once
#include <functional>
#include <memory>

#include "backends/backend.h"
#include "tessera/backend_plugin.h"

namespace tessera {

/// The plug-in table for `make`'s backend, named `name` (a plug-in's name may
/// not be a built-in backend's). Call once, from the library's entry point.
const tsrp_plugin* export_backend_as_plugin(const tsrp_host* host, const char* name, const char* description,
                                            std::function<std::unique_ptr<Backend>()> make);

}  // namespace tessera
