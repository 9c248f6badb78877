#pragma once
#include <map>
#include <string>

#include "ir/graph.h"

namespace tessera {

/// Gives every graph input a static shape. `shapes` maps an input name to its
/// dims (overriding what the model says); symbolic dims (dim_param) can also be
/// bound by name: {"batch", {4}}. Needs: nothing. Guarantees: every graph input
/// has a static shape, or a user error names the input and its unbound dim.
void bind_input_shapes(Graph& graph, const std::map<std::string, Shape>& shapes);

}  // namespace tessera
