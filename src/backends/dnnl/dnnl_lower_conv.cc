// Lowering of Conv (1-D to 3-D, groups, dilations, padding) with what fuses
// after it: BatchNormalization folded into the weights and bias when the
// region is loaded, a per-channel constant Add as the bias, a residual Add as
// a sum post-op (or a binary post-op when it broadcasts), and activations as
// eltwise post-ops. ConvTranspose lowers to oneDNN's deconvolution. Nodes the
// core marks for bfloat16 read bf16 source and weights (float32 accumulation).
#include "backends/dnnl/dnnl_geometry.h"
#include "backends/dnnl/dnnl_lowering.h"
#include "backends/dnnl/dnnl_op_tables.h"
#include "ir/error.h"
#include "ir/window_geometry.h"

namespace tessera::dnnl_backend {

void lower_convolution(Lowering& lowering, const FusedNode& fused) {
  const Node& conv = *fused.node;
  const Graph& g = *fused.graph;
  const Graph& region = lowering.graph();
  const bool transposed = conv.op_type == "ConvTranspose";
  const ValueId x = fused.region_value(conv.inputs[0]);
  const ValueId w = fused.region_value(conv.inputs[1]);
  const ValueId b = conv.has_input(2) ? fused.region_value(conv.inputs[2]) : kNoValue;
  if (!lowering.is_constant_value(w)) lowering.unsupported(conv, "weights must be a constant");
  if (b != kNoValue && !lowering.is_constant_value(b)) lowering.unsupported(conv, "bias must be a constant");
  const std::vector<int64_t> x_dims = dims_of(region, x);
  const std::vector<int64_t> w_dims = dims_of(region, w);
  const size_t n = x_dims.size() - 2;
  const int64_t group = conv.attrs.get_int_or("group", 1);
  if (group < 1) lowering.unsupported(conv, "group must be positive");
  std::vector<int64_t> strides, dilations, pad_begin, pad_end;
  const ValueId out_of_conv = conv.outputs[0];
  std::vector<int64_t> y_dims = g.value(out_of_conv).type.dims;
  if (transposed) {
    // Paddings that give the inferred output size (output_padding absorbed into the end padding).
    const DeconvolutionGeometry geometry = deconvolution_geometry(g, conv);
    if (!geometry.refusal.empty()) lowering.unsupported(conv, geometry.refusal);
    strides = geometry.strides;
    dilations = geometry.dilations;
    pad_begin = geometry.pad_begin;
    pad_end = geometry.pad_end;
  } else {
    // Explicit pads from pads or auto_pad: the ir's geometry, as shape inference computed it.
    const WindowGeometry geometry = window_geometry(conv, std::vector<int64_t>(x_dims.begin() + 2, x_dims.end()),
                                                    std::vector<int64_t>(w_dims.begin() + 2, w_dims.end()), false);
    strides = geometry.stride;
    dilations = geometry.dilation;
    pad_begin = geometry.pad_begin;
    pad_end = geometry.pad_end;
  }
  const int64_t out_channels = y_dims[1];

  Step step;
  step.kind = find_structured_op(conv.op_type)->step;
  step.node = fused.region_node;
  step.ints = convolution_step_ints(strides, dilations, pad_begin, pad_end);

  // Weights in oneDNN's shape: [O, I, k...] or grouped [G, O/G, I/G, k...].
  std::vector<int64_t> weight_dims;
  ConstantTransform weight_transform = ConstantTransform::kNone;
  if (transposed) {
    // ONNX keeps [I, O/G, k...]; oneDNN wants [O, I, k...] or [G, O/G, I/G, k...]: another order of bytes.
    if (w_dims[0] % group != 0) lowering.unsupported(conv, "input channels not divisible by group");
    weight_dims = {w_dims[1], w_dims[0] / group};
    if (group != 1) weight_dims.insert(weight_dims.begin(), group);
    weight_dims.insert(weight_dims.end(), w_dims.begin() + 2, w_dims.end());
    weight_transform = ConstantTransform::kDeconvolutionWeights;
    if (!fused.tail.empty()) lowering.unsupported(conv, "nothing fuses into ConvTranspose");
  } else {
    weight_dims = grouped_weight_dims(w_dims, group);
    if (group != 1) weight_transform = ConstantTransform::kGroupedWeights;
  }
  std::vector<int32_t> weight_sources = {w};
  std::vector<float> weight_floats;
  int32_t bias_slot = -1;
  size_t t = 0;
  ValueId chain = out_of_conv;  // the value the tail continues from (in fused.graph)

  // BatchNormalization right after the Conv folds into weights and bias.
  if (t < fused.tail.size() && fused.tail[t]->op_type == "BatchNormalization") {
    const Node& bn = *fused.tail[t];
    ValueId params[4];
    for (size_t i = 0; i < 4; ++i) {
      params[i] = fused.region_value(bn.inputs[i + 1]);
      if (!lowering.is_constant_value(params[i])) lowering.unsupported(bn, "batch-norm parameters must be constants");
    }
    const float eps = bn.attrs.get_float_or("epsilon", 1e-5f);
    weight_transform = ConstantTransform::kFoldBatchNormWeights;
    weight_sources = {w, params[0], params[3]};
    weight_floats = {eps};
    bias_slot = lowering.constant_slot({out_channels}, ConstantTransform::kFoldBatchNormBias,
                                       {b == kNoValue ? -1 : b, params[0], params[1], params[2], params[3]}, {eps});
    chain = bn.outputs[0];
    ++t;
  } else if (b != kNoValue) {
    bias_slot = lowering.constant_slot({out_channels}, ConstantTransform::kNone, {b});
  }
  const int32_t weight_slot = lowering.constant_slot(weight_dims, weight_transform, weight_sources, weight_floats);

  for (; t < fused.tail.size(); ++t) {
    if (std::optional<PostOp> swish = chain_gated_activation(fused, t, chain)) {
      step.post_ops.push_back(*swish);
      chain = fused.tail[++t]->outputs[0];
      continue;
    }
    const Node& next = *fused.tail[t];
    if (next.op_type == "Add") {
      const ValueId other_body = next.inputs[0] == chain ? next.inputs[1] : next.inputs[0];
      const ValueId other = fused.region_value(other_body);
      const std::vector<int64_t> other_dims = dims_of(region, other);
      const bool per_channel = lowering.is_constant_value(other) && shape_numel(other_dims) == out_channels &&
                               (other_dims.size() == y_dims.size() - 1 || other_dims.size() == y_dims.size()) &&
                               other_dims[other_dims.size() - n - 1] == out_channels;
      bool has_sum = false;
      for (const PostOp& p : step.post_ops) has_sum |= p.kind == PostOpKind::kSum;
      if (per_channel && bias_slot < 0 && step.post_ops.empty()) {
        bias_slot = lowering.constant_slot({out_channels}, ConstantTransform::kNone, {other});
      } else if (per_channel) {
        std::vector<int64_t> channel_dims(y_dims.size(), 1);
        channel_dims[1] = out_channels;
        PostOp add;
        add.kind = PostOpKind::kBinary;
        add.algorithm = static_cast<int32_t>(find_binary_op("Add")->algorithm);
        add.slot = lowering.constant_slot(channel_dims, ConstantTransform::kNone, {other});
        step.post_ops.push_back(add);
      } else if (other_dims == y_dims && !lowering.is_constant_value(other)) {
        PostOp p;
        p.kind = has_sum ? PostOpKind::kBinary : PostOpKind::kSum;
        p.algorithm = has_sum ? static_cast<int32_t>(find_binary_op("Add")->algorithm) : 0;
        p.alpha = 1.0f;  // a sum's scale
        p.slot = lowering.slot_of(other);
        step.post_ops.push_back(p);
      } else {
        lowering.unsupported(next, "an Add that cannot be fused into the convolution");
      }
    } else if (std::optional<PostOp> activation = chain_activation(lowering, fused, next)) {
      step.post_ops.push_back(*activation);
    } else {
      lowering.unsupported(next, "cannot fuse " + next.op_type + " into a convolution");
    }
    chain = next.outputs[0];
  }

  // bf16 (where the core allows it): bf16 source and weights, float32 accumulation, bias and post-ops;
  // the output in bf16 only when bf16 convolutions and matmuls alone read it.
  const bool bf16 = lowering.bf16(fused.region_node);
  memory::data_type compute_type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  memory::data_type output_type = bf16 ? lowering.compute_output_type(fused.outputs[0]) : memory::data_type::f32;
  step.inputs = {lowering.slot_of(x), weight_slot};
  auto requests_for = [&](memory::data_type type) {
    std::vector<memory::desc> r = {any_desc(x_dims, type), any_desc(weight_dims, type)};
    if (bias_slot >= 0) r.push_back(any_desc({out_channels}));
    return r;
  };
  if (bias_slot >= 0) step.inputs.push_back(bias_slot);
  std::vector<memory::desc> requests = requests_for(compute_type);
  AlgorithmMemo* memo = bf16 ? nullptr : lowering.algorithm_memo();
  const auto memoised = memo ? memo->find(fused.region_node) : AlgorithmMemo::iterator();
  if (!transposed && memo && memoised != memo->end()) {
    step.algorithm = memoised->second;  // measured at an earlier shape of this region
  } else if (!transposed) {
    double ms = 0;
    step.algorithm = choose_convolution_algorithm(lowering, step, requests, any_desc(y_dims, output_type), &ms);
    if (memo) (*memo)[fused.region_node] = step.algorithm;
    if (bf16 && ms > 0) {
      // Where float32 has Winograd (fewer multiplies), it can beat bf16's direct convolution: measure
      // both and keep bf16 unless float32 is clearly (5%) faster.
      double f32_ms = 0;
      const int32_t f32_algorithm = choose_convolution_algorithm(lowering, step, requests_for(memory::data_type::f32),
                                                                 any_desc(y_dims), &f32_ms);
      if (f32_ms > 0 && f32_ms < 0.95 * ms) {
        compute_type = output_type = memory::data_type::f32;
        requests = requests_for(compute_type);
        step.algorithm = f32_algorithm;
      }
    }
  }
  // A trailing swish (SiLU) as Tessera's loop after the convolution where that measured faster than
  // oneDNN's post-op (memo: at the first shape of an open region only; key ~node).
  bool split_swish = false;
  if (!bf16 && !transposed && !step.post_ops.empty()) {
    const int32_t key = ~fused.region_node;
    const auto known = memo ? memo->find(key) : AlgorithmMemo::iterator();
    if (memo && known != memo->end()) {
      split_swish = known->second != 0;
    } else {
      split_swish = swish_pass_faster(lowering, step, requests, any_desc(y_dims, output_type));
      if (memo) (*memo)[key] = split_swish ? 1 : 0;
    }
  }
  if (!split_swish) {
    lowering.add_step(std::move(step), requests, any_desc(y_dims, output_type), fused.outputs[0], y_dims);
    return;
  }
  const PostOp swish = step.post_ops.back();
  step.post_ops.pop_back();
  const int32_t product = lowering.add_step(std::move(step), requests, any_desc(y_dims, output_type), kNoValue, y_dims);
  lowering.add_step(eltwise_step_of(swish, fused.region_node, product), {memory::desc()}, lowering.desc(product),
                    fused.outputs[0], y_dims);
}

}  // namespace tessera::dnnl_backend
