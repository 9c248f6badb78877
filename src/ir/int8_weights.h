// Weight-only int8 products, as the IR sees them: MatMul(x, DequantizeLinear(
// int8 weights, scales)) with x float32 (`tessera quantize --weights-only`
// writes them; so do other weight-only quantizers). One home for what counts
// as such weights: constant folding leaves their DequantizeLinear in place
// (the weights stay 8-bit in the plan and the artifact) and the native
// backend's MatMulInt8Weights composite reads them (nn_int8_weights.h).
#pragma once
#include <cstdint>

#include "ir/graph.h"

namespace tessera {

/// Smaller weight matrices are folded to float32 like any constant.
inline constexpr int64_t kInt8WeightMinElements = int64_t{1} << 16;

/// `node` is DequantizeLinear(int8 constant [K, N] of at least
/// kInt8WeightMinElements, float32 constant scale: one, or one per column
/// (axis 1), zero point absent or all 0).
bool dequantizes_int8_weights(const Graph& graph, const Node& node);

}  // namespace tessera
