// What the native backend declares: every op that has a native kernel, and
// five fused patterns (see lower_composite in native_backend.cc): Conv→Relu /
// Conv→Clip (constant bounds), which its GEMM and depthwise epilogues apply;
// MatMul (constant weights)→Add (constant bias)[→Relu / Clip], one GEMM that
// starts from the bias and clamps as it stores; the same with the weights
// int8 behind a DequantizeLinear (weight-only int8), one MatMul on the 8-bit
// weights; MatMul of a Transpose of the last two axes, read transposed in
// place; and the decomposed LayerNorm, which runs as one LayerNormalization.
#include "backends/native/native_declarations.h"

#include <limits>

#include "backends/native/kernel.h"
#include "ir/int8_weights.h"
#include "partition/common_patterns.h"

namespace tessera::native {
namespace {

bool float32_output(const Graph& graph, const Node& node) {
  return node.has_output(0) && graph.value(node.outputs[0]).type.dtype == DType::kFloat32;
}

/// Clip's min and max inputs, when present, are float32 constant scalars.
bool constant_clip_bounds(const Graph& graph, const Node& node) {
  if (node.attrs.has("min") || node.attrs.has("max")) return false;  // legacy form: normalised away
  for (size_t i = 1; i < 3; ++i) {
    if (!node.has_input(i)) continue;
    const Value& v = graph.value(node.inputs[i]);
    if (!v.constant || v.constant->numel() != 1 || v.constant->dtype() != DType::kFloat32) return false;
  }
  return true;
}

/// MatMul by a constant float32 matrix [K, N] (the native GEMM packs it once).
bool constant_matrix_weight(const Graph& graph, const Node& node) {
  if (!float32_output(graph, node) || node.inputs.size() != 2 || !graph.is_constant(node.inputs[1])) return false;
  const TensorType& a = graph.value(node.inputs[0]).type;
  const TensorType& b = graph.value(node.inputs[1]).type;
  return a.rank_known && a.dims.size() >= 2 && b.dims.size() == 2 && b.dtype == DType::kFloat32;
}

/// Add of the MatMul's output and a constant float32 bias of N values over
/// its last axis ([N], [1, N], ...; no higher rank than the product's), so
/// the sum has the product's shape.
bool bias_over_last_axis(const Graph& graph, const Node& node) {
  if (!float32_output(graph, node) || node.inputs.size() != 2) return false;
  for (size_t i = 0; i < 2; ++i) {
    const ValueId bias = node.inputs[i], product = node.inputs[1 - i];
    if (!graph.is_constant(bias)) continue;
    const TensorType& b = graph.value(bias).type;
    const TensorType& p = graph.value(product).type;
    if (b.dtype != DType::kFloat32 || !p.rank_known || p.dims.empty() || b.dims.empty() || b.dims.size() > p.dims.size()) {
      return false;
    }
    const int64_t n = p.dims.back();
    if (n < 0 || b.dims.back() != n) return false;
    for (size_t d = 0; d + 1 < b.dims.size(); ++d) {
      if (b.dims[d] != 1) return false;
    }
    return true;
  }
  return false;
}

/// A Transpose that swaps only the last two axes of a float32 tensor of rank >= 2.
bool swaps_last_two_axes(const Graph& graph, const Node& node) {
  if (!float32_output(graph, node) || node.inputs.empty()) return false;
  const TensorType& x = graph.value(node.inputs[0]).type;
  if (!x.rank_known || x.rank() < 2) return false;
  const std::vector<int64_t> perm = node.attrs.get_ints_or("perm", {});
  if (perm.empty()) return x.rank() == 2;  // no perm: the axes reversed
  if (static_cast<int64_t>(perm.size()) != x.rank()) return false;
  const int64_t r = x.rank();
  for (int64_t d = 0; d < r - 2; ++d) {
    if (perm[static_cast<size_t>(d)] != d) return false;
  }
  return perm[static_cast<size_t>(r - 2)] == r - 1 && perm[static_cast<size_t>(r - 1)] == r - 2;
}

Declarations make_declarations() {
  Declarations d;
  d.any_op([](const Graph&, const Node& node) -> SupportDecision {
    if (KernelRegistry::instance().find(node.domain, node.op_type)) return {true, ""};
    return {false, "no native kernel for " + node.op_type};
  });
  // x, then Relu(x) or Clip(x[, min[, max]]) with constant bounds (min and max optional, possibly omitted as "").
  auto activated = [](const Pattern& x) {
    auto bound = [] { return either({constant(), absent()}); };
    std::vector<Pattern> out = {op("Relu", {x}), op("Clip", {x}), op("Clip", {x, bound()}), op("Clip", {x, bound(), bound()})};
    for (size_t i = 1; i < out.size(); ++i) out[i].where(constant_clip_bounds);
    return out;
  };
  Pattern conv = op("Conv");
  conv.where(float32_output);
  d.pattern(kConvActivation, either(activated(conv)));
  // MatMul -> Add(bias) [-> Relu | Clip]: the product and the bias, then either activation or none.
  auto biased_product = [&](Pattern product) {
    Pattern biased = op("Add", {product, constant()});
    biased.where(bias_over_last_axis);
    std::vector<Pattern> out = activated(biased);
    out.push_back(biased);
    return out;
  };
  Pattern matmul = op("MatMul", {any(), constant()});
  matmul.where(constant_matrix_weight);
  d.pattern(kMatMulBias, either(biased_product(matmul)));
  // Weight-only int8 (ir/int8_weights.h): the same shapes around MatMul(x, DequantizeLinear(q, scale[, zero
  // point])) and the bare product; Gemm(x, DequantizeLinear(...)[, bias]) with or without an activation.
  std::vector<Pattern> int8_matmuls;
  auto reads_int8 = [](const Graph& graph, const Node& node) {
    return float32_output(graph, node) && int8_weights_of(graph, node) != nullptr;
  };
  for (Pattern dq : {op("DequantizeLinear", {constant(), constant()}), op("DequantizeLinear", {constant(), constant(), constant()})}) {
    dq.where(dequantizes_int8_weights);
    Pattern product = op("MatMul", {any(), dq});
    product.where(reads_int8);
    for (Pattern& p : biased_product(product)) int8_matmuls.push_back(std::move(p));
    int8_matmuls.push_back(product);
    for (Pattern gemm : {op("Gemm", {any(), dq}), op("Gemm", {any(), dq, constant()})}) {
      gemm.where(reads_int8);
      for (Pattern& p : activated(gemm)) int8_matmuls.push_back(std::move(p));
      int8_matmuls.push_back(gemm);
    }
  }
  d.pattern(kMatMulInt8Weights, either(int8_matmuls));
  Pattern transposed = op("Transpose", {any()});
  transposed.where(swaps_last_two_axes);
  Pattern transposed_product = op("MatMul", {any(), transposed});
  transposed_product.where([](const Graph& graph, const Node& node) {
    return float32_output(graph, node) && graph.value(node.inputs[0]).type.rank_known &&
           graph.value(node.inputs[0]).type.rank() >= 2;
  });
  d.pattern(kMatMulTransposedB, transposed_product);
  d.pattern(kLayerNorm, layer_norm_pattern(any(), [](const Graph& graph, const Node& node) {
              return node.has_output(0) && graph.value(node.outputs[0]).type.dtype == DType::kFloat32;
            }));
  return d;
}

}  // namespace

const Declarations& native_declarations() {
  static const Declarations declarations = make_declarations();
  return declarations;
}

std::pair<float, float> clamp_of_activation(const Graph& graph, const Node& activation) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (activation.op_type == "Relu") return {0.0f, kInf};
  float bounds[2] = {-kInf, kInf};
  for (size_t i = 1; i < 3; ++i) {
    if (activation.has_input(i)) bounds[i - 1] = graph.value(activation.inputs[i]).constant->as<float>()[0];
  }
  return {bounds[0], bounds[1]};
}

}  // namespace tessera::native
