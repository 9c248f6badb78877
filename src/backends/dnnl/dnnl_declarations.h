// The oneDNN backend's declarations (see src/partition/declarations.h).
#pragma once
#include <cstdint>

#include <optional>

#include "ir/ops/tensor_internal.h"
#include "partition/declarations.h"

namespace tessera::dnnl_backend {

const Declarations& dnnl_declarations();

/// The data inputs (the first `data_inputs`, or all) and every present
/// output are float32 with a static, non-empty shape of rank at most 6; the
/// reason names the first that is not.
SupportDecision float32_static(const Graph& graph, const Node& node, size_t data_inputs = SIZE_MAX);

/// A Slice of `graph` whose starts, ends, axes and steps are constants with
/// every step 1, resolved (starts are the offsets per axis), or nullopt.
std::optional<SliceSpec> constant_slice(const Graph& graph, const Node& node);

// The checks that decide each claimed node (float32_static included), named
// by the op tables (dnnl_op_tables.cc); a refusal names what oneDNN cannot run.
// dnnl_declarations.cc:
SupportDecision check_conv(const Graph& graph, const Node& node);
SupportDecision check_matmul(const Graph& graph, const Node& node);
SupportDecision check_gemm(const Graph& graph, const Node& node);
SupportDecision check_binary(const Graph& graph, const Node& node);      // every binary_ops() row
SupportDecision check_activation(const Graph& graph, const Node& node);  // every claimed eltwise_ops() row
// dnnl_declarations_more.cc:
SupportDecision check_pooling(const Graph& graph, const Node& node);  // every pooling_ops() row
SupportDecision check_batch_norm(const Graph& graph, const Node& node);
SupportDecision check_layer_norm(const Graph& graph, const Node& node);
SupportDecision check_softmax(const Graph& graph, const Node& node);
SupportDecision check_concat(const Graph& graph, const Node& node);
SupportDecision check_transpose(const Graph& graph, const Node& node);
SupportDecision check_slice(const Graph& graph, const Node& node);
SupportDecision check_reshape(const Graph& graph, const Node& node);  // Reshape, Flatten, Squeeze, Unsqueeze
SupportDecision check_identity(const Graph& graph, const Node& node);
SupportDecision check_conv_transpose(const Graph& graph, const Node& node);
// dnnl_declarations_quantized.cc:
SupportDecision check_qlinear(const Graph& graph, const Node& node);          // QLinearConv, QLinearMatMul
SupportDecision check_quantize_linear(const Graph& graph, const Node& node);  // QuantizeLinear, DequantizeLinear
/// MatMulInteger with 8-bit A, a constant 2-D int8 B and zero zero points for B (the head of the
/// MatMulIntegerScale[Bias] patterns).
SupportDecision check_matmul_integer(const Graph& graph, const Node& node);
/// Mul of a float32 product [..., N] by a float32 constant of 1 or N values over the last axis.
bool scales_columns(const Graph& graph, const Node& mul);
/// A DequantizeLinear whose input comes from a QLinearConv / QLinearMatMul with the same (constant)
/// output scale and zero point as its own.
bool dequantizes_with_producer_parameters(const Graph& graph, const Node& dequantize);

}  // namespace tessera::dnnl_backend
