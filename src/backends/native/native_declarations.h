// The native backend's declarations (see src/partition/declarations.h).
#pragma once
#include <utility>

#include "partition/declarations.h"

namespace tessera::native {

/// The composite a Conv followed by a Relu or Clip becomes.
inline constexpr const char* kConvActivation = "ConvActivation";
/// The composite a MatMul by a constant 2-D float32 matrix becomes with the
/// Add of a constant bias over its last axis, and optionally a Relu or Clip
/// after: one MatMul whose GEMM starts from the bias and clamps as it stores
/// (attributes tessera_bias and tessera_clamp).
inline constexpr const char* kMatMulBias = "MatMulBias";
/// MatMul(x, DequantizeLinear(int8 weights, scales)) (ir/int8_weights.h),
/// optionally with a bias Add and a Relu or Clip as kMatMulBias has them, or
/// Gemm(x, DequantizeLinear(...)[, bias]) with or without a Relu or Clip: one
/// MatMul reading the int8 weights (tessera_int8_scales, nn_int8_weights.h;
/// tessera_transpose_b for Gemm's transB).
inline constexpr const char* kMatMulInt8Weights = "MatMulInt8Weights";
/// MatMul(a, Transpose(b)) where the Transpose swaps only the last two axes
/// (attention's Q x K^T): one MatMul reading b transposed (tessera_transpose_b),
/// with no transposed copy.
inline constexpr const char* kMatMulTransposedB = "MatMulTransposedB";
/// The decomposed LayerNorm (common_patterns.h) becomes one LayerNormalization.
inline constexpr const char* kLayerNorm = "LayerNorm";

const Declarations& native_declarations();

/// [low, high] of a Relu or a Clip whose bounds are constants (or absent),
/// as the Conv epilogue applies it.
std::pair<float, float> clamp_of_activation(const Graph& graph, const Node& activation);

}  // namespace tessera::native
