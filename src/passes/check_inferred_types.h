// Re-checks the types stored in a graph (e.g. one loaded from an artifact)
// against what shape inference derives from its inputs.
#pragma once
#include "ir/graph.h"

namespace tessera {

/// For each node in order, runs its schema's shape inference on the stored
/// input types (and constant input values) and checks that every output's
/// stored type is exactly the inferred one: same dtype, same rank, same dims,
/// unknown where inference leaves them unknown (a stored static shape where
/// only the data decides it would let the memory plan hand a kernel too small
/// a buffer). Also checks input dtypes and arity against the op's schema.
/// Needs: a verified graph (ids in range, topological order). Guarantees: a
/// plan built from the stored types cannot disagree with what kernels compute.
/// Throws a user error "inconsistent plan: node 'x' (Op): output 'y' is stored
/// as float32[1x4], its inputs give float32[1x8]"; an unknown op is a user error.
/// Subgraphs are not checked: control-flow kernels infer them at run time.
void check_inferred_types(const Graph& graph);

}  // namespace tessera
