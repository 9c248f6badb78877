// Lowering of element-wise ops: activations to oneDNN eltwise (GELU's erf
// form as one eltwise_gelu_erf), and Add/Sub/Mul/Div/Max/Min to oneDNN
// binary with the broadcast operand second, both in the first operand's
// layout (so a residual Add between two blocked Conv outputs stays blocked,
// and a per-channel or scalar operand is blocked alike). Activations after
// them fuse as eltwise post-ops.
#include "backends/dnnl/dnnl_lowering.h"
#include "backends/dnnl/dnnl_op_tables.h"
#include <cmath>
#include <optional>
#include <utility>

#include "ir/error.h"

namespace tessera::dnnl_backend {
namespace {

/// alpha x + beta, the eltwise_linear an Add/Sub/Mul/Div of x and a scalar constant is.
struct ScalarLinear {
  float alpha = 1, beta = 0;
  ValueId x = kNoValue;  // the tensor operand, a region value
};

/// The eltwise_linear that computes Add/Sub/Mul/Div of a tensor and a finite scalar constant (either
/// side, as ONNX broadcasts it), or nullopt. The tensor operand must have the output's dims (the
/// scalar is what broadcasts).
std::optional<ScalarLinear> scalar_linear(const Lowering& lowering, const FusedNode& fused, const Node& node) {
  if (!node.domain.empty() || node.inputs.size() != 2 || node.outputs.empty()) return std::nullopt;
  const std::string& op = node.op_type;
  if (op != "Add" && op != "Sub" && op != "Mul" && op != "Div") return std::nullopt;
  auto constant = [&](ValueId id) {
    const ValueId value = fused.region_value(id);
    return value == kNoValue ? std::nullopt : finite_scalar_constant(lowering.graph(), value);
  };
  const std::optional<float> right = constant(node.inputs[1]);
  const std::optional<float> left = right ? std::nullopt : constant(node.inputs[0]);
  if (!right && !left) return std::nullopt;
  ScalarLinear linear;
  linear.x = fused.region_value(right ? node.inputs[0] : node.inputs[1]);
  if (linear.x == kNoValue || dims_of(lowering.graph(), linear.x) != fused.graph->value(node.outputs[0]).type.dims) {
    return std::nullopt;
  }
  if (lowering.graph().value(linear.x).type.dtype != DType::kFloat32) return std::nullopt;
  const float c = right ? *right : *left;
  if (op == "Add") {
    linear.beta = c;
  } else if (op == "Sub") {
    linear.alpha = right ? 1.0f : -1.0f;
    linear.beta = right ? -c : c;
  } else if (op == "Mul") {
    linear.alpha = c;
  } else if (right) {
    linear.alpha = 1.0f / c;  // x / ±0 as x * ±Inf: ±Inf for x != 0 and NaN for 0 and NaN, as the quotient
  } else {
    return std::nullopt;  // c / x is no linear function of x
  }
  return linear;
}

}  // namespace

void lower_elementwise(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  const Graph& g = *fused.graph;
  const Graph& region = lowering.graph();
  const ValueId final_output = fused.outputs[0];
  const std::vector<int64_t> y_dims = dims_of(region, final_output);
  Step step;
  step.node = fused.region_node;
  std::vector<memory::desc> requests;
  size_t tail_start = 0;

  if (fused.pattern.empty() && node.op_type == "HardSigmoid" && node.domain.empty()) {
    // max(0, min(1, alpha x + beta)): a linear step whose clip post-op the slow-kernel guard runs as a
    // step of its own where oneDNN has no JIT kernel with it (blocked layouts).
    step.kind = StepKind::kEltwise;
    step.algorithm = static_cast<int32_t>(dnnl::algorithm::eltwise_linear);
    step.floats = {node.attrs.get_float_or("alpha", 0.2f), node.attrs.get_float_or("beta", 0.5f)};
    step.inputs = {lowering.slot_of(fused.region_value(node.inputs[0]))};
    requests = {memory::desc()};
    PostOp clip;
    clip.kind = PostOpKind::kEltwise;
    clip.algorithm = static_cast<int32_t>(dnnl::algorithm::eltwise_clip_v2);
    clip.alpha = 0.0f;
    clip.beta = 1.0f;
    step.post_ops.push_back(clip);
  } else if (fused.pattern == "Swish" || fused.pattern == "HardSwishProduct") {
    // Body: Sigmoid(x) -> Mul(x, ·) (either order): one eltwise_swish on x; HardSigmoid(x) with
    // HardSwish's constants -> Mul(x, ·): one eltwise_hardswish.
    const bool swish = fused.pattern == "Swish";
    step.kind = StepKind::kEltwise;
    step.algorithm = static_cast<int32_t>(swish ? dnnl::algorithm::eltwise_swish : dnnl::algorithm::eltwise_hardswish);
    step.floats = {swish ? 1.0f : 0.0f, 0.0f};
    step.inputs = {lowering.slot_of(fused.region_value(node.inputs[0]))};
    requests = {memory::desc()};
    tail_start = fused.tail.size();
  } else if (fused.pattern == "Gelu") {
    // Body: Div(x, √2) → Erf → Add(1) → Mul(x, ·) → Mul(·, 0.5); x is the Div's first input.
    step.kind = StepKind::kEltwise;
    step.algorithm = static_cast<int32_t>(dnnl::algorithm::eltwise_gelu_erf);
    step.inputs = {lowering.slot_of(fused.region_value(node.inputs[0]))};
    requests = {memory::desc()};
    tail_start = fused.tail.size();
  } else if (std::optional<PostOp> activation = chain_activation(lowering, fused, node)) {
    step.kind = StepKind::kEltwise;
    step.algorithm = activation->algorithm;
    step.floats = {activation->alpha, activation->beta};
    step.inputs = {lowering.slot_of(fused.region_value(node.inputs[0]))};
    requests = {memory::desc()};
  } else if (std::optional<ScalarLinear> linear = scalar_linear(lowering, fused, node)) {
    // x + c, x - c, c - x, x * c, x / c with a constant scalar c: one eltwise_linear (alpha x + beta)
    // in x's layout. oneDNN 2.6 runs a blocked binary_div by a scalar on its reference kernel (10 ms
    // for 32x56x56, paddle2onnx's HardSwish); x / c becomes x * (1/c), within an ulp of the quotient.
    step.kind = StepKind::kEltwise;
    step.algorithm = static_cast<int32_t>(dnnl::algorithm::eltwise_linear);
    step.floats = {linear->alpha, linear->beta};
    step.inputs = {lowering.slot_of(linear->x)};
    requests = {memory::desc()};
  } else if (const BinaryOp* binary = node.domain.empty() ? find_binary_op(node.op_type) : nullptr) {
    if (node.inputs.size() != 2) lowering.unsupported(node, "only two operands");
    ValueId first = fused.region_value(node.inputs[0]);
    ValueId second = fused.region_value(node.inputs[1]);
    const std::vector<int64_t> out_dims = g.value(node.outputs[0]).type.dims;
    if (dims_of(region, first) != out_dims) {
      if (!binary->commutative || dims_of(region, second) != out_dims) {
        lowering.unsupported(node, "the first operand broadcasts");
      }
      std::swap(first, second);
    }
    std::vector<int64_t> second_dims = dims_of(region, second);
    int32_t second_slot;
    if (lowering.is_constant_value(second)) {
      while (second_dims.size() < out_dims.size()) second_dims.insert(second_dims.begin(), 1);
      second_slot = lowering.constant_slot(second_dims, ConstantTransform::kNone, {second});
    } else {
      if (second_dims.size() != out_dims.size()) lowering.unsupported(node, "a computed operand of lower rank");
      second_slot = lowering.slot_of(second);
    }
    step.kind = StepKind::kBinary;
    step.algorithm = static_cast<int32_t>(binary->algorithm);
    const int32_t first_slot = lowering.slot_of(first);
    step.inputs = {first_slot, second_slot};
    // Both operands in the first one's layout, a broadcast one too (a per-channel scale or a scalar of
    // a blocked activation blocked the same way): oneDNN 2.6 has only its reference kernel (ref:any,
    // 9.6 ms for a 32x56x56 squeeze-excite multiply, against 0.03 ms) when they differ.
    const memory::desc second_request =
        second_dims == out_dims ? lowering.desc(first_slot) : layout_like(lowering.desc(first_slot), second_dims);
    requests = {memory::desc(), second_request};
  } else {
    lowering.unsupported(node, node.op_type + " is not lowered by the oneDNN backend");
  }
  ValueId chain = node.outputs[0];
  for (size_t t = tail_start; t < fused.tail.size(); ++t) {
    if (std::optional<PostOp> swish = chain_gated_activation(fused, t, chain)) {
      step.post_ops.push_back(*swish);
      chain = fused.tail[++t]->outputs[0];
      continue;
    }
    chain = fused.tail[t]->outputs[0];
    std::optional<PostOp> activation = chain_activation(lowering, fused, *fused.tail[t]);
    if (!activation) lowering.unsupported(*fused.tail[t], "cannot fuse " + fused.tail[t]->op_type);
    step.post_ops.push_back(*activation);
  }
  const memory::desc out_request = step.kind == StepKind::kEltwise ? memory::desc() : any_desc(y_dims);
  // Eltwise writes in its input's layout: its output role is the input's.
  lowering.add_step(std::move(step), requests,
                    out_request == memory::desc() ? lowering.desc(lowering.slot_of(fused.region_value(node.inputs[0])))
                                                  : out_request,
                    final_output, y_dims);
}

}  // namespace tessera::dnnl_backend
