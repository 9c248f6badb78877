// Lowering of the quantized ops (what passes/fold_qdq.cc makes of a QDQ
// model, or a model's own QLinear ops) to oneDNN's int8 primitives:
//   - QLinearConv: a convolution reading uint8/int8 x and int8 weights (VNNI
//     on this CPU), dst = x_scale * w_scale / y_scale * (acc + bias) with x's
//     and y's zero points as oneDNN zero points, writing uint8/int8;
//   - QLinearMatMul with constant int8 B: the same as a matmul (with the
//     patterns QLinearMatMulDequantize, writing float32, and
//     QLinearMatMulBiasGeluQuantize, adding the bias, applying GELU and
//     requantizing for the next layer, all as post-ops); with a
//     computed B (attention), an int8 matmul with a weights zero point (a
//     uint8 B shifted to int8 by a reorder first);
//   - MatMulInteger -> Cast -> Mul(scales) [-> Add(bias)] (fold_qdq's form of a
//     QDQ product left in float32): an int8 matmul writing float32, the Mul's
//     constant as its output scales, the bias a binary post-op;
//   - DequantizeLinear / QuantizeLinear (per tensor): reorders with a scale
//     and a zero point, in whatever layout the value already has.
// The declarations (dnnl_declarations_more.cc, check_qlinear_*) have checked
// the conditions: constant scalar scales and zero points (w_scale may be
// per output channel), weight zero points 0, static shapes.
#include "backends/dnnl/dnnl_geometry.h"
#include "backends/dnnl/dnnl_lowering.h"
#include "backends/dnnl/dnnl_op_tables.h"
#include "ir/error.h"
#include "ir/window_geometry.h"

namespace tessera::dnnl_backend {
namespace {

memory::data_type eight_bit(DType dtype) { return dtype == DType::kInt8 ? memory::data_type::s8 : memory::data_type::u8; }

double scalar(const Lowering& lowering, const FusedNode& fused, const Node& node, size_t input) {
  const ValueId id = fused.region_value(node.inputs[input]);
  const Value& v = lowering.graph().value(id);
  if (!v.constant || v.constant->numel() != 1) lowering.unsupported(node, "a scale or zero point that is not a constant scalar");
  return v.constant->double_at(0);
}

/// The per-channel (or single) multipliers x_scale * w_scale[c] / y_scale.
std::vector<float> output_scales(const Lowering& lowering, const FusedNode& fused, const Node& node, size_t a_scale,
                                 size_t b_scale, size_t y_scale) {
  const double xs = scalar(lowering, fused, node, a_scale);
  const double ys = scalar(lowering, fused, node, y_scale);
  const Value& ws = lowering.graph().value(fused.region_value(node.inputs[b_scale]));
  if (!ws.constant) lowering.unsupported(node, "the weight scale is not a constant");
  std::vector<float> scales;
  for (int64_t c = 0; c < ws.constant->numel(); ++c) scales.push_back(static_cast<float>(xs * ws.constant->double_at(c) / ys));
  return scales;
}

/// The layout `slot` has now, with another data type (plain when its layout has no tag).
memory::desc same_layout(const Lowering& lowering, int32_t slot, memory::data_type type) {
  const memory::desc& current = lowering.desc(slot);
  const int32_t tag = format_tag_of(current);
  if (tag <= 0) return plain_desc(lowering.dims(slot), type);
  const memory::dims d = current.dims();
  return memory::desc(d, type, static_cast<memory::format_tag>(tag));
}

/// The saturation of an 8-bit output of scale `scale` and zero point `zero_point`, in units of
/// `unit`, as a clip post-op: what rounding-free fusions keep of the QuantizeLinear they skip.
PostOp saturation(double scale, double zero_point, bool is_signed, double unit) {
  const double lo = is_signed ? -128.0 : 0.0, hi = is_signed ? 127.0 : 255.0;
  PostOp clip;
  clip.kind = PostOpKind::kEltwise;
  clip.algorithm = static_cast<int32_t>(dnnl::algorithm::eltwise_clip);
  clip.alpha = static_cast<float>(scale * (lo - zero_point) / unit);
  clip.beta = static_cast<float>(scale * (hi - zero_point) / unit);
  return clip;
}

/// What follows a QLinearConv in the residual patterns.
struct Residual {
  const Node* dequantize_conv = nullptr;   // DequantizeLinear of the convolution's output
  const Node* dequantize_other = nullptr;  // DequantizeLinear of the value added
  const Node* activation = nullptr;        // may be null
  const Node* quantize = nullptr;          // the pattern's root
};

void lower_qlinear_conv(Lowering& lowering, const FusedNode& fused, const Node& conv, const Residual* residual) {
  const Graph& region = lowering.graph();
  const ValueId x = fused.region_value(conv.inputs[0]);
  const ValueId w = fused.region_value(conv.inputs[3]);
  const ValueId b = conv.has_input(8) ? fused.region_value(conv.inputs[8]) : kNoValue;
  if (!residual && !fused.tail.empty()) lowering.unsupported(conv, "nothing fuses into QLinearConv");
  const std::vector<int64_t> x_dims = dims_of(region, x);
  const std::vector<int64_t> w_dims = dims_of(region, w);
  const std::vector<int64_t> y_dims = fused.graph->value(conv.outputs[0]).type.dims;
  const int64_t group = conv.attrs.get_int_or("group", 1);
  const WindowGeometry geometry = window_geometry(conv, std::vector<int64_t>(x_dims.begin() + 2, x_dims.end()),
                                                  std::vector<int64_t>(w_dims.begin() + 2, w_dims.end()), false);
  Step step;
  step.kind = StepKind::kConvolution;
  step.node = fused.region_node;
  step.ints = convolution_step_ints(geometry.stride, geometry.dilation, geometry.pad_begin, geometry.pad_end);
  const std::vector<int64_t> weight_dims = grouped_weight_dims(w_dims, group);
  const ConstantTransform transform = group != 1 ? ConstantTransform::kGroupedWeights : ConstantTransform::kNone;
  step.output_scales = output_scales(lowering, fused, conv, 1, 4, 6);
  step.scale_mask = step.output_scales.size() > 1 ? 2 : 0;  // per output channel: dim 1 of dst
  step.src_zero_point = static_cast<int32_t>(scalar(lowering, fused, conv, 2));
  step.dst_zero_point = static_cast<int32_t>(scalar(lowering, fused, conv, 7));
  const Node* output_node = &conv;
  if (residual) {
    // dst = act(x_scale * w_scale * (acc + bias) + other_scale * (other - other_zp)) / q_scale + q_zp:
    // the scales over q's, the residual a sum post-op reading the 8-bit operand.
    const Node& q = *residual->quantize;
    const Node& dq = *residual->dequantize_other;
    const double q_scale = scalar(lowering, fused, q, 1);
    const double x_scale = scalar(lowering, fused, conv, 1);
    const Value& ws = region.value(fused.region_value(conv.inputs[4]));
    step.output_scales.clear();
    for (int64_t c = 0; c < ws.constant->numel(); ++c) {
      step.output_scales.push_back(static_cast<float>(x_scale * ws.constant->double_at(c) / q_scale));
    }
    step.dst_zero_point = q.has_input(2) ? static_cast<int32_t>(scalar(lowering, fused, q, 2)) : 0;
    // The convolution's own QuantizeLinear is skipped: its saturation stays (a clip in q's units), its
    // rounding does not.
    step.post_ops.push_back(saturation(scalar(lowering, fused, conv, 6), scalar(lowering, fused, conv, 7),
                                       fused.graph->value(conv.outputs[0]).type.dtype == DType::kInt8, q_scale));
    const ValueId other = fused.region_value(dq.inputs[0]);
    PostOp sum;
    sum.kind = PostOpKind::kSum;
    sum.alpha = static_cast<float>(scalar(lowering, fused, dq, 1) / q_scale);
    sum.beta = static_cast<float>(dq.has_input(2) ? scalar(lowering, fused, dq, 2) : 0.0);
    sum.algorithm = static_cast<int32_t>(eight_bit(region.value(other).type.dtype));
    sum.slot = lowering.slot_of(other);
    step.post_ops.push_back(sum);
    if (residual->activation) {
      std::optional<PostOp> act = chain_activation(lowering, fused, *residual->activation);
      if (!act) lowering.unsupported(*residual->activation, "not an activation oneDNN fuses");
      step.post_ops.push_back(*act);
    }
    output_node = &q;
  }
  const int32_t weight_slot = lowering.constant_slot(weight_dims, transform, {w});
  step.inputs = {lowering.slot_of(x), weight_slot};
  std::vector<memory::desc> requests = {any_desc(x_dims, eight_bit(region.value(x).type.dtype)),
                                        any_desc(weight_dims, memory::data_type::s8)};
  if (b != kNoValue) {
    // The int32 bias, held as float32 (oneDNN adds it to the accumulator before the scale).
    step.inputs.push_back(lowering.constant_slot({y_dims[1]}, ConstantTransform::kNone, {b}));
    requests.push_back(any_desc({y_dims[1]}));
  }
  const memory::data_type out_type = eight_bit(fused.graph->value(output_node->outputs[0]).type.dtype);
  lowering.add_step(std::move(step), requests, any_desc(y_dims, out_type), fused.outputs[0], y_dims);
}

/// QLinearMatMul of two computed operands (attention's products): oneDNN's int8
/// matmul takes int8 weights, so a uint8 B is first shifted to int8 by a reorder
/// (b - 128, its zero point moving by -128 too); then one int8 matmul with A's and
/// B's zero points, the requantisation as its output scale and Y's zero point.
void lower_qlinear_matmul_computed(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  const Graph& region = lowering.graph();
  const ValueId a = fused.region_value(node.inputs[0]);
  const ValueId b = fused.region_value(node.inputs[3]);
  const std::vector<int64_t> y_dims = fused.graph->value(node.outputs[0]).type.dims;
  const std::vector<int64_t> a_dims = dims_of(region, a), b_dims = dims_of(region, b);
  if (a_dims.size() != y_dims.size() || b_dims.size() != y_dims.size()) {
    lowering.unsupported(node, "operands of a lower rank than the output");
  }
  const memory::data_type a_type = eight_bit(region.value(a).type.dtype);
  const memory::data_type b_type = eight_bit(region.value(b).type.dtype);
  int32_t b_slot = lowering.in_layout(lowering.slot_of(b), plain_desc(b_dims, b_type));
  int32_t b_zero_point = static_cast<int32_t>(scalar(lowering, fused, node, 5));
  if (b_type == memory::data_type::u8) {
    Step shift;
    shift.kind = StepKind::kReorder;
    shift.node = fused.region_node;
    shift.inputs = {b_slot};
    shift.src_zero_point = 128;  // s8 = u8 - 128, exactly
    b_slot = lowering.add_step(std::move(shift), {memory::desc()}, plain_desc(b_dims, memory::data_type::s8), kNoValue, b_dims);
    b_zero_point -= 128;
  }
  Step matmul;
  matmul.kind = StepKind::kMatMul;
  matmul.node = fused.region_node;
  matmul.inputs = {lowering.in_layout(lowering.slot_of(a), plain_desc(a_dims, a_type)), b_slot};
  matmul.output_scales = output_scales(lowering, fused, node, 1, 4, 6);
  matmul.src_zero_point = static_cast<int32_t>(scalar(lowering, fused, node, 2));
  matmul.weights_zero_point = b_zero_point;
  matmul.dst_zero_point = static_cast<int32_t>(scalar(lowering, fused, node, 7));
  const memory::data_type out_type = eight_bit(fused.graph->value(node.outputs[0]).type.dtype);
  lowering.add_step(std::move(matmul), {memory::desc(), memory::desc()}, plain_desc(y_dims, out_type), fused.outputs[0], y_dims);
}

void lower_qlinear_matmul(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  const Graph& region = lowering.graph();
  const ValueId a = fused.region_value(node.inputs[0]);
  const ValueId b = fused.region_value(node.inputs[3]);
  // Pattern QLinearMatMulDequantize: the DequantizeLinear that alone reads the product (same scale and
  // zero point) is folded away: the product is written in float32, saturated but not rounded.
  // QLinearMatMulBiasGeluQuantize goes on: + bias, GELU, and the QuantizeLinear that ends it.
  const bool requantized = fused.pattern == "QLinearMatMulBiasGeluQuantize";
  const bool dequantized = fused.pattern == "QLinearMatMulDequantize" || requantized;
  if (!dequantized && !fused.tail.empty()) lowering.unsupported(node, "nothing fuses into QLinearMatMul");
  if (!lowering.is_constant_value(b)) {
    if (dequantized) lowering.unsupported(node, "a dequantized product needs constant weights");
    return lower_qlinear_matmul_computed(lowering, fused);
  }
  const std::vector<int64_t> y_dims = fused.graph->value(node.outputs[0]).type.dims;
  const std::vector<int64_t> a_dims = dims_of(region, a);
  const std::vector<int64_t> b_dims = dims_of(region, b);
  const size_t rank = y_dims.size();
  Step step;
  step.kind = StepKind::kMatMul;
  step.node = fused.region_node;
  std::vector<int64_t> weight_dims = b_dims;
  if (rank > 2) step.ints = {1};  // leading dims collapse into rows against the 2-D constant weights
  step.output_scales = output_scales(lowering, fused, node, 1, 4, 6);
  step.scale_mask = step.output_scales.size() > 1 ? 2 : 0;  // per column: dim 1 of the 2-D dst
  step.src_zero_point = static_cast<int32_t>(scalar(lowering, fused, node, 2));
  step.dst_zero_point = static_cast<int32_t>(scalar(lowering, fused, node, 7));
  const int32_t b_slot = lowering.constant_slot(weight_dims, ConstantTransform::kNone, {b});
  step.inputs = {lowering.slot_of(a), b_slot};
  const memory::data_type a_type = eight_bit(region.value(a).type.dtype);
  std::vector<memory::desc> requests = {rank > 2 ? memory::desc() : any_desc(a_dims, a_type),
                                        any_desc(weight_dims, memory::data_type::s8)};
  if (rank > 2) requests[0] = plain_desc(a_dims, a_type);
  memory::data_type out_type = eight_bit(fused.graph->value(node.outputs[0]).type.dtype);
  if (dequantized) {
    const double y_scale = scalar(lowering, fused, node, 6);
    for (float& scale : step.output_scales) scale = static_cast<float>(scale * y_scale);  // x_scale * w_scale
    step.post_ops.push_back(saturation(y_scale, step.dst_zero_point, out_type == memory::data_type::s8, 1.0));
    step.dst_zero_point = 0;
    out_type = memory::data_type::f32;
  }
  if (requantized) {
    const Node* add = nullptr;
    const Node* q = nullptr;
    for (const Node* n : fused.tail) {
      if (n->op_type == "Add" && !add) add = n;  // the bias (GELU's own Add comes later)
      if (n->op_type == "QuantizeLinear") q = n;
    }
    if (!add || !q) throw_internal_error("oneDNN lowering: pattern ", fused.pattern, " without its bias or QuantizeLinear");
    const ValueId bias = fused.region_value(lowering.is_constant_value(fused.region_value(add->inputs[1])) ? add->inputs[1]
                                                                                                           : add->inputs[0]);
    const int64_t n = y_dims.back();
    const std::vector<int64_t> bias_dims = {1, n};  // the 2-D (collapsed) product's columns
    PostOp add_bias;
    add_bias.kind = PostOpKind::kBinary;
    add_bias.algorithm = static_cast<int32_t>(dnnl::algorithm::binary_add);
    add_bias.slot = lowering.constant_slot(bias_dims, ConstantTransform::kNone, {bias});
    step.post_ops.push_back(add_bias);
    PostOp gelu;
    gelu.kind = PostOpKind::kEltwise;
    gelu.algorithm = static_cast<int32_t>(dnnl::algorithm::eltwise_gelu_erf);
    step.post_ops.push_back(gelu);
    PostOp requantize;  // x / q_scale; oneDNN then adds q's zero point, rounds and saturates
    requantize.kind = PostOpKind::kEltwise;
    requantize.algorithm = static_cast<int32_t>(dnnl::algorithm::eltwise_linear);
    requantize.alpha = static_cast<float>(1.0 / scalar(lowering, fused, *q, 1));
    step.post_ops.push_back(requantize);
    step.dst_zero_point = q->has_input(2) ? static_cast<int32_t>(scalar(lowering, fused, *q, 2)) : 0;
    out_type = eight_bit(fused.graph->value(q->outputs[0]).type.dtype);
  }
  lowering.add_step(std::move(step), requests, rank > 2 ? plain_desc(y_dims, out_type) : any_desc(y_dims, out_type),
                    fused.outputs[0], y_dims);
}

/// DequantizeLinear (8-bit to float32) and QuantizeLinear (float32 to 8-bit) as reorders.
void lower_quantize_linear(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  if (!fused.tail.empty()) lowering.unsupported(node, "nothing fuses into " + node.op_type);
  const ValueId x = fused.region_value(node.inputs[0]);
  const int32_t slot = lowering.slot_of(x);
  const double scale = scalar(lowering, fused, node, 1);
  const int32_t zero_point = node.has_input(2) ? static_cast<int32_t>(scalar(lowering, fused, node, 2)) : 0;
  Step step;
  step.kind = StepKind::kReorder;
  step.node = fused.region_node;
  step.inputs = {slot};
  memory::data_type out_type = memory::data_type::f32;
  if (node.op_type == "DequantizeLinear") {
    step.output_scales = {static_cast<float>(scale)};
    step.src_zero_point = zero_point;
  } else {
    step.output_scales = {static_cast<float>(1.0 / scale)};
    step.dst_zero_point = zero_point;
    out_type = eight_bit(fused.graph->value(node.outputs[0]).type.dtype);
  }
  const std::vector<int64_t> dims = dims_of(lowering.graph(), x);
  lowering.add_step(std::move(step), {memory::desc()}, same_layout(lowering, slot, out_type), fused.outputs[0], dims);
}

}  // namespace

void lower_quantized(Lowering& lowering, const FusedNode& fused) {
  const std::string& op = fused.node->op_type;
  if (op == "QLinearConv") return lower_qlinear_conv(lowering, fused, *fused.node, nullptr);
  if (op == "QLinearMatMul") return lower_qlinear_matmul(lowering, fused);  // alone, or pattern QLinearMatMulDequantize
  lower_quantize_linear(lowering, fused);
}

void lower_matmul_integer_scaled(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  const Graph& region = lowering.graph();
  const Node* mul = nullptr;
  const Node* add = nullptr;
  for (const Node* n : fused.tail) {
    if (n->op_type == "Mul") mul = n;
    if (n->op_type == "Add") add = n;
  }
  if (!mul || fused.tail.size() != (add ? 3u : 2u)) throw_internal_error("oneDNN lowering: pattern ", fused.pattern, " without its nodes");
  const ValueId a = fused.region_value(node.inputs[0]);
  const ValueId b = fused.region_value(node.inputs[1]);
  const Node& last = add ? *add : *mul;
  const std::vector<int64_t> y_dims = fused.graph->value(last.outputs[0]).type.dims;
  const std::vector<int64_t> a_dims = dims_of(region, a);
  const std::vector<int64_t> b_dims = dims_of(region, b);
  const size_t rank = y_dims.size();
  const int64_t n = y_dims.back();
  Step step;
  step.kind = StepKind::kMatMul;
  step.node = fused.region_node;
  if (rank > 2) step.ints = {1};  // leading dims collapse into rows against the 2-D constant weights
  const Value& scales = region.value(fused.region_value(mul->inputs[1]));
  if (!scales.constant) lowering.unsupported(*mul, "the scale is not a constant");
  for (int64_t c = 0; c < scales.constant->numel(); ++c) step.output_scales.push_back(static_cast<float>(scales.constant->double_at(c)));
  if (step.output_scales.size() == 1 && n > 1) {
    step.scale_mask = 0;
  } else {
    step.scale_mask = 2;  // per column: dim 1 of the 2-D dst
  }
  step.src_zero_point = node.has_input(2) ? static_cast<int32_t>(scalar(lowering, fused, node, 2)) : 0;
  if (add) {
    const ValueId bias = fused.region_value(lowering.is_constant_value(fused.region_value(add->inputs[1])) ? add->inputs[1] : add->inputs[0]);
    PostOp add_bias;
    add_bias.kind = PostOpKind::kBinary;
    add_bias.algorithm = static_cast<int32_t>(dnnl::algorithm::binary_add);
    add_bias.slot = lowering.constant_slot({1, n}, ConstantTransform::kNone, {bias});
    step.post_ops.push_back(add_bias);
  }
  step.inputs = {lowering.slot_of(a), lowering.constant_slot(b_dims, ConstantTransform::kNone, {b})};
  const memory::data_type a_type = eight_bit(region.value(a).type.dtype);
  std::vector<memory::desc> requests = {rank > 2 ? plain_desc(a_dims, a_type) : any_desc(a_dims, a_type),
                                        any_desc(b_dims, memory::data_type::s8)};
  const memory::data_type out_type = memory::data_type::f32;
  lowering.add_step(std::move(step), requests, rank > 2 ? plain_desc(y_dims, out_type) : any_desc(y_dims, out_type),
                    fused.outputs[0], y_dims);
}

void lower_qlinear_conv_add(Lowering& lowering, const FusedNode& fused) {
  // The body's nodes in graph order: the QLinearConv, its DequantizeLinear, the other
  // DequantizeLinear (before or after them), the Add, an activation, the QuantizeLinear.
  std::vector<const Node*> body = {fused.node};
  body.insert(body.end(), fused.tail.begin(), fused.tail.end());
  const Node* conv = nullptr;
  const Node* add = nullptr;
  Residual residual;
  for (const Node* n : body) {
    if (n->op_type == "QLinearConv") conv = n;
    else if (n->op_type == "Add") add = n;
    else if (n->op_type == "QuantizeLinear") residual.quantize = n;
    else if (n->op_type != "DequantizeLinear") residual.activation = n;
  }
  if (!conv || !add || !residual.quantize) throw_internal_error("oneDNN lowering: pattern ", fused.pattern, " without its nodes");
  for (const Node* n : body) {
    if (n->op_type == "DequantizeLinear" && n->inputs[0] != conv->outputs[0]) residual.dequantize_other = n;
    if (n->op_type == "DequantizeLinear" && n->inputs[0] == conv->outputs[0]) residual.dequantize_conv = n;
  }
  if (!residual.dequantize_other || !residual.dequantize_conv) throw_internal_error("oneDNN lowering: pattern ", fused.pattern, " without the residual");
  lower_qlinear_conv(lowering, fused, *conv, &residual);
}

}  // namespace tessera::dnnl_backend
