// Lowering of BatchNormalization (inference, on its own: after a Conv it
// folds into the weights, see dnnl_lower_conv.cc; a Relu after it fuses as
// oneDNN's fuse_norm_relu), LayerNormalization over
// the last axis, and Softmax / LogSoftmax over one axis. Batch norm and a
// softmax over the channel axis keep their input's (possibly blocked)
// layout; layer norm and other softmax axes run in plain layout.
#include "backends/dnnl/dnnl_lowering.h"
#include "backends/dnnl/dnnl_op_tables.h"
#include "partition/common_patterns.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {
namespace {

void lower_batch_norm(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  const ValueId x = fused.region_value(node.inputs[0]);
  const std::vector<int64_t> y_dims = dims_of(lowering.graph(), fused.outputs[0]);
  if (y_dims.size() < 2) lowering.unsupported(node, "input of rank below 2");
  const int64_t channels = y_dims[1];
  // ONNX order: X, scale, B, mean, var; oneDNN's roles: src, mean, variance, scale, shift.
  std::vector<int32_t> parameters;
  for (size_t input : {3, 4, 1, 2}) {
    const ValueId v = fused.region_value(node.inputs[input]);
    if (!lowering.is_constant_value(v)) lowering.unsupported(node, "scale, B, mean and var must be constants");
    if (shape_numel(dims_of(lowering.graph(), v)) != channels) lowering.unsupported(node, "a parameter is not per channel");
    parameters.push_back(lowering.constant_slot({channels}, ConstantTransform::kNone, {v}));
  }
  Step step;
  step.kind = StepKind::kBatchNorm;
  step.node = fused.region_node;
  step.floats = {node.attrs.get_float_or("epsilon", 1e-5f)};
  step.inputs = {lowering.slot_of(x)};
  step.inputs.insert(step.inputs.end(), parameters.begin(), parameters.end());
  // BatchNormRelu: the Relu as an eltwise_relu post-op, which the step builds as fuse_norm_relu.
  for (const Node* tail : fused.tail) {
    std::optional<PostOp> relu = activation_post_op(*fused.graph, *tail);
    if (!relu || tail->op_type != "Relu") lowering.unsupported(node, "a fused node other than Relu after it");
    step.post_ops.push_back(*relu);
  }
  const memory::desc vector = plain_desc({channels});
  lowering.add_step(std::move(step), {memory::desc(), vector, vector, vector, vector}, any_desc(y_dims), fused.outputs[0],
                    y_dims);
}

void lower_layer_norm(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  const Graph& region = lowering.graph();
  const ValueId x = fused.region_value(node.inputs[0]);
  const std::vector<int64_t> y_dims = dims_of(region, fused.outputs[0]);
  const int64_t rank = static_cast<int64_t>(y_dims.size());
  const int64_t axis = node.attrs.get_int_or("axis", -1);
  if (axis != -1 && axis != rank - 1) lowering.unsupported(node, "axis other than the last");
  const int64_t last = y_dims.back();
  Step step;
  step.kind = StepKind::kLayerNorm;
  step.node = fused.region_node;
  step.floats = {node.attrs.get_float_or("epsilon", 1e-5f)};
  step.inputs = {lowering.plain(lowering.slot_of(x))};
  for (size_t input = 1; input < 3; ++input) {
    if (!node.has_input(input)) continue;
    const ValueId v = fused.region_value(node.inputs[input]);
    if (!lowering.is_constant_value(v) || shape_numel(dims_of(region, v)) != last) {
      lowering.unsupported(node, "Scale and B must be constants over the last axis");
    }
    step.inputs.push_back(lowering.constant_slot({last}, ConstantTransform::kNone, {v}));
  }
  std::vector<memory::desc> requests(step.inputs.size(), plain_desc({last}));
  requests[0] = memory::desc();
  lowering.add_step(std::move(step), requests, plain_desc(y_dims), fused.outputs[0], y_dims);
}

void lower_softmax(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  const ValueId x = fused.region_value(node.inputs[0]);
  const std::vector<int64_t> y_dims = dims_of(lowering.graph(), fused.outputs[0]);
  const int64_t rank = static_cast<int64_t>(y_dims.size());
  int64_t axis = node.attrs.get_int_or("axis", node.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) lowering.unsupported(node, "axis out of range");
  // Before opset 13 the input was flattened to 2-D at the axis: one axis only when it is the last.
  if (node.opset < 13 && axis != rank - 1) lowering.unsupported(node, "opset below 13 with an axis other than the last");
  Step step;
  step.kind = find_structured_op(node.op_type)->step;  // kSoftmax or kLogSoftmax
  step.node = fused.region_node;
  step.ints = {axis};
  int32_t slot = lowering.slot_of(x);
  // A blocked layout blocks the channel axis: a softmax over it runs in place; any other axis runs plain.
  if (axis != 1) slot = lowering.plain(slot);
  step.inputs = {slot};
  lowering.add_step(std::move(step), {memory::desc()}, lowering.desc(slot), fused.outputs[0], y_dims);
}

}  // namespace

void lower_layer_norm_pattern(Lowering& lowering, const FusedNode& fused) {
  const Node& root = *fused.node;
  const std::optional<LayerNormParts> parts = parse_layer_norm_body(*fused.graph);
  if (!parts) lowering.unsupported(root, "composite LayerNorm whose body is not a layer normalisation");
  const Graph& region = lowering.graph();
  auto region_input = [&](size_t index) { return fused.region_value(fused.graph->inputs[index]); };
  const ValueId x = region_input(parts->input);
  const ValueId scale = region_input(parts->scale);
  const ValueId bias = region_input(parts->bias);
  const ValueId epsilon = region_input(parts->epsilon);
  const std::vector<int64_t> y_dims = dims_of(region, fused.outputs[0]);
  const int64_t last = y_dims.back();
  for (ValueId v : {scale, bias, epsilon}) {
    if (!lowering.is_constant_value(v)) lowering.unsupported(root, "LayerNorm parameters must be constants");
  }
  if (shape_numel(dims_of(region, scale)) != last || shape_numel(dims_of(region, bias)) != last ||
      region.value(epsilon).constant->numel() != 1) {
    lowering.unsupported(root, "LayerNorm scale and bias must cover the last axis, epsilon be a scalar");
  }
  Step step;
  step.kind = StepKind::kLayerNorm;
  step.node = fused.region_node;
  step.floats = {static_cast<float>(region.value(epsilon).constant->double_at(0))};
  step.inputs = {lowering.plain(lowering.slot_of(x)), lowering.constant_slot({last}, ConstantTransform::kNone, {scale}),
                 lowering.constant_slot({last}, ConstantTransform::kNone, {bias})};
  std::vector<memory::desc> requests(step.inputs.size(), plain_desc({last}));
  requests[0] = memory::desc();
  lowering.add_step(std::move(step), requests, plain_desc(y_dims), fused.outputs[0], y_dims);
}

void lower_normalization(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  if (!fused.tail.empty() && fused.pattern != "BatchNormRelu") lowering.unsupported(node, "nothing fuses into " + node.op_type);
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    if (node.has_output(i)) lowering.unsupported(node, "only the first output");
  }
  if (node.op_type == "BatchNormalization") return lower_batch_norm(lowering, fused);
  if (node.op_type == "LayerNormalization") return lower_layer_norm(lowering, fused);
  lower_softmax(lowering, fused);
}

}  // namespace tessera::dnnl_backend
