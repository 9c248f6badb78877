#pragma once
#include <map>
#include <string>

#include "ir/graph.h"

namespace tessera {

/// Binds graph input shapes. `shapes` maps an input name to its dims
/// (overriding what the model says); symbolic dims (dim_param) can also be
/// bound by name: {"batch", {4}}. Dims left unbound stay open (-1, with their
/// symbol): the model compiles once for every value they take at run time.
/// Needs: nothing. Guarantees: every tensor input has a known rank, given
/// shapes fit the model's and no dim is negative but the open ones, or a user
/// error names the input and the dim.
void bind_input_shapes(Graph& graph, const std::map<std::string, Shape>& shapes);

}  // namespace tessera
