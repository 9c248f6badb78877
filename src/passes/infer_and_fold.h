#pragma once
#include <functional>
#include <vector>

#include "ir/graph.h"

namespace tessera {

/// Evaluates one node on constant inputs (the runtime passes the native backend's).
using NodeEvaluator = std::function<std::vector<Tensor>(const Node&, const std::vector<const Tensor*>&)>;

/// Infers every value's dtype and shape in topological order and folds nodes
/// whose inputs are all constant (deterministic ops, outputs up to a size limit)
/// into constants, so that shape computations (Shape→Gather→Concat→Reshape)
/// become static. With open dims, what passes/shape_values.h knows of a shape
/// computation folds too (an element of Shape(x) where x's dim is static), and a
/// Reshape to a computed target known but for its open dims reads a constant
/// target (0 and -1 there). Needs: bind_input_shapes, schema normalisation. Keeps: graph
/// inputs and outputs. Guarantees: each node's inputs have the dtypes its
/// schema accepts (else a user error naming node, op and value); values have
/// static shapes wherever they do not depend on input data.
void infer_and_fold(Graph& graph, const NodeEvaluator& evaluate);

/// Removes nodes none of whose outputs is used (folded nodes among them), and
/// constants nothing reads. Needs: nothing. Keeps: graph outputs.
void eliminate_dead_nodes(Graph& graph);

}  // namespace tessera
