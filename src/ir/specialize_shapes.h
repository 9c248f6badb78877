// Shape specialisation of a graph compiled with open dims: the same graph
// with its inputs' dims fixed and every value's type inferred again from
// them. Backends whose library needs concrete shapes (oneDNN primitives)
// lower such a copy per input shape at run time.
#pragma once
#include <vector>

#include "ir/graph.h"

namespace tessera {

/// A copy of `graph` whose input i has dims `input_dims[i]` (same rank as
/// declared; a declared static dim must match), with every node's outputs
/// inferred again in node order (the bodies of "Composite" nodes of domain
/// "tessera" copied and inferred through as well). Constants are shared.
/// Throws a user error naming the input, node and dims when the dims do not
/// fit the graph. Nothing is folded: the nodes are the same.
Graph specialize_shapes(const Graph& graph, const std::vector<Shape>& input_dims);

/// True when every tensor value of `graph` (and of its composites' bodies) has
/// a static type: nothing to specialise.
bool all_shapes_static(const Graph& graph);

}  // namespace tessera
