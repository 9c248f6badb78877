#pragma once
#include "ir/graph.h"

namespace tessera {

/// Folds a Relu, or a Clip with constant (or absent) bounds, into the Conv
/// that produces its input, as the attribute tessera_clamp = [low, high]
/// (Relu: [0, +inf]), when the Conv's output feeds only that activation and
/// is not a graph output. The activation node is removed and listed in the
/// Conv's `fused` record, so placement and profiles can still name it.
/// Needs: infer_and_fold (dtypes known; only float32 Convs are fused).
/// Keeps: every graph output's value and name. Guarantees: outputs equal to
/// the unfused graph's (the clamp runs in the Conv's epilogue, NaN passes).
void fuse_activations(Graph& graph);

}  // namespace tessera
