// The other direction of src/backends/plugin/graph_view.h: a Graph rebuilt
// from the read-only C view a plug-in is given, so that a backend written in
// C++ against Tessera's IR can run behind the plug-in ABI (export_backend.h).
#pragma once
#include "ir/graph.h"
#include "tessera/backend_plugin.h"

namespace tessera {

/// A deep copy (constants and attribute tensors included). Throws a user
/// error for what the view cannot hold: an unknown dtype code, a value index
/// out of range, a rank without dims.
Graph graph_from_view(const tsrp_graph& view);

}  // namespace tessera
