// Weight-only int8 products, as the IR sees them: MatMul(x, DequantizeLinear(
// int8 weights, scales)) or Gemm(x, DequantizeLinear(...)[, bias]) with x
// float32 (`tessera quantize --weights-only` writes them; so do other
// weight-only quantizers). One home for what counts as such weights and such
// readers: constant folding leaves their DequantizeLinear in place (the
// weights stay 8-bit in the plan and the artifact) and the native backend's
// MatMulInt8Weights composite reads them (nn_int8_weights.h).
#pragma once
#include <cstdint>

#include "ir/graph.h"

namespace tessera {

/// Smaller weight matrices are folded to float32 like any constant.
inline constexpr int64_t kInt8WeightMinElements = int64_t{1} << 16;

/// `node` is DequantizeLinear(int8 constant matrix of at least
/// kInt8WeightMinElements, float32 constant scales: one, or one per row or
/// per column, zero point absent or all 0).
bool dequantizes_int8_weights(const Graph& graph, const Node& node);

/// `reader` reads `dq` (dequantizes_int8_weights) as the weights of a product
/// native runs on them: MatMul's B with a scale per column (or one), or Gemm's
/// B (alpha 1, no transA; a scale per output channel: B's columns, its rows
/// with transB) whose C is absent or, with beta 1, a constant bias of N values.
bool reads_as_int8_weights(const Graph& graph, const Node& reader, const Node& dq);

/// The DequantizeLinear that makes `reader`'s B when reads_as_int8_weights holds; null otherwise.
const Node* int8_weights_of(const Graph& graph, const Node& reader);

}  // namespace tessera
