// Tessera's own CPU backend: supports every op that has a schema and a kernel.
#pragma once
#include <memory>
#include <vector>

#include "backends/backend.h"

namespace tessera {

std::unique_ptr<Backend> make_native_backend();

/// A MatMul or Gemm node attribute (int 1): read the constant B where it lies instead of keeping a
/// packed copy. The session sets it on a region's native fallback, whose region holds its own copy of
/// the weights (a decoder's fallback held a second 500 MB of them).
inline constexpr const char* kWeightsInPlaceAttribute = "tessera_weights_in_place";

/// Runs one node on constant inputs with the native kernels (used by constant
/// folding and by tests as the reference evaluator).
std::vector<Tensor> evaluate_node_natively(const Node& node, const std::vector<const Tensor*>& inputs);

}  // namespace tessera
