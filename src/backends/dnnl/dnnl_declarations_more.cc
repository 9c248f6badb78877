// The checks of the oneDNN backend's pooling, normalisation, softmax,
// layout ops and ConvTranspose (lowered in dnnl_lower_pooling.cc,
// dnnl_lower_normalization.cc, dnnl_lower_layout.cc, dnnl_lower_conv.cc),
// named by the op tables (dnnl_op_tables.cc). Each check claims exactly what
// the lowering runs and names the attribute, dtype or shape it refuses.
#include <algorithm>

#include "backends/dnnl/dnnl_declarations.h"
#include "backends/dnnl/dnnl_geometry.h"

namespace tessera::dnnl_backend {
namespace {

SupportDecision refuse(std::string reason) { return {false, std::move(reason)}; }
const SupportDecision kYes{true, ""};

const std::vector<int64_t>& dims(const Graph& graph, ValueId id) { return graph.value(id).type.dims; }

SupportDecision only_first_output(const Node& node) {
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    if (node.has_output(i)) return refuse("output " + std::to_string(i) + " is not produced by oneDNN");
  }
  return kYes;
}

/// A constant of `count` elements laid along the last axis only ([count] or [1, ..., count]).
bool is_last_axis_constant(const Graph& graph, ValueId id, int64_t count) {
  if (!graph.is_constant(id)) return false;
  const std::vector<int64_t>& d = dims(graph, id);
  return shape_numel(d) == count && !d.empty() && d.back() == count;
}

}  // namespace

SupportDecision check_pooling(const Graph& graph, const Node& node) {
  if (node.op_type == "MaxPool") {
    if (node.has_output(1)) return refuse("the Indices output");
    if (node.attrs.get_int_or("storage_order", 0) != 0) return refuse("storage_order = 1");
  }
  const DType x = graph.value(node.inputs[0]).type.dtype;
  const bool eight_bit = (x == DType::kUInt8 || x == DType::kInt8) && node.op_type == "MaxPool";
  // Max pooling of 8-bit values (a folded QDQ MaxPool): only the dtype differs from the float32 checks.
  SupportDecision d = eight_bit ? kYes : float32_static(graph, node);
  if (eight_bit && (!graph.value(node.inputs[0]).type.is_static() || !graph.value(node.outputs[0]).type.is_static())) {
    return refuse("a shape known only at run time");
  }
  if (!d.supported) return d;
  const PoolingGeometry geometry = pooling_geometry(graph, node);
  return geometry.refusal.empty() ? kYes : refuse(geometry.refusal);
}

SupportDecision check_batch_norm(const Graph& graph, const Node& node) {
  SupportDecision d = only_first_output(node);
  if (!d.supported) return refuse("training outputs (running mean and variance)");
  if (node.attrs.get_int_or("training_mode", 0) != 0) return refuse("training_mode = 1");
  if (node.attrs.get_int_or("spatial", 1) != 1) return refuse("spatial = 0");
  if ((d = float32_static(graph, node)).supported == false) return d;
  const std::vector<int64_t>& x = dims(graph, node.inputs[0]);
  if (x.size() < 2 || x.size() > 5) return refuse("input of rank " + std::to_string(x.size()) + " (oneDNN: 2 to 5)");
  if (node.inputs.size() != 5) return refuse("needs scale, B, mean and var");
  for (size_t i = 1; i < 5; ++i) {
    if (!graph.is_constant(node.inputs[i])) return refuse("input " + std::to_string(i) + " (scale, B, mean, var) is not a constant");
    if (shape_numel(dims(graph, node.inputs[i])) != x[1]) return refuse("input " + std::to_string(i) + " is not per channel");
  }
  return kYes;
}

SupportDecision check_layer_norm(const Graph& graph, const Node& node) {
  SupportDecision d = only_first_output(node);
  if (!d.supported) return refuse("the Mean and InvStdDev outputs");
  if ((d = float32_static(graph, node)).supported == false) return d;
  const std::vector<int64_t>& x = dims(graph, node.inputs[0]);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank < 2 || rank > 5) return refuse("input of rank " + std::to_string(rank) + " (oneDNN: 2 to 5)");
  const int64_t axis = node.attrs.get_int_or("axis", -1);
  if (axis != -1 && axis != rank - 1) return refuse("axis " + std::to_string(axis) + "; oneDNN normalises the last axis only");
  if (node.attrs.get_int_or("stash_type", 1) != 1) return refuse("stash_type other than 1 (float32)");
  if (!is_last_axis_constant(graph, node.inputs[1], x.back())) return refuse("Scale is not a constant over the last axis");
  if (node.has_input(2) && !is_last_axis_constant(graph, node.inputs[2], x.back())) {
    return refuse("B is not a constant over the last axis");
  }
  return kYes;
}

SupportDecision check_softmax(const Graph& graph, const Node& node) {
  SupportDecision d = float32_static(graph, node);
  if (!d.supported) return d;
  const int64_t rank = graph.value(node.inputs[0]).type.rank();
  int64_t axis = node.attrs.get_int_or("axis", node.opset >= 13 ? -1 : 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return refuse("axis out of range");
  if (node.opset < 13 && axis != rank - 1) {
    return refuse("opset " + std::to_string(node.opset) + " flattens at the axis; oneDNN runs only a last axis then");
  }
  return kYes;
}

SupportDecision check_concat(const Graph& graph, const Node& node) {
  SupportDecision d = float32_static(graph, node);
  if (!d.supported) return d;
  const int64_t rank = graph.value(node.outputs[0]).type.rank();
  // Concat's definition (normalize_concat) writes opset 1's default axis into the node.
  if (!node.attrs.has("axis")) return refuse("no axis attribute");
  int64_t axis = node.attrs.get_int("axis");
  if (axis < 0) axis += rank;
  if (rank == 0 || axis < 0 || axis >= rank) return refuse("axis out of range");
  for (ValueId input : node.inputs) {
    if (input == kNoValue) return refuse("an omitted input");
  }
  return kYes;
}

SupportDecision check_transpose(const Graph& graph, const Node& node) {
  SupportDecision d = float32_static(graph, node);
  if (!d.supported) return d;
  const int64_t rank = graph.value(node.inputs[0]).type.rank();
  std::vector<int64_t> permutation = node.attrs.get_ints_or("perm", {});
  if (permutation.empty()) return kYes;
  if (static_cast<int64_t>(permutation.size()) != rank) return refuse("perm does not have one entry per axis");
  std::vector<int64_t> sorted = permutation;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < rank; ++i) {
    if (sorted[static_cast<size_t>(i)] != i) return refuse("perm is not a permutation");
  }
  return kYes;
}

/// Reshape, Flatten, Squeeze, Unsqueeze: data input and output float32 and
/// static; the shape or axes input (when there is one) a constant.
SupportDecision check_reshape(const Graph& graph, const Node& node) {
  SupportDecision d = float32_static(graph, node, 1);
  if (!d.supported) return d;
  if (node.has_input(1) && !graph.is_constant(node.inputs[1])) {
    return refuse(std::string(node.op_type == "Reshape" ? "shape" : "axes") + " is not a constant");
  }
  if (shape_numel(dims(graph, node.inputs[0])) != shape_numel(dims(graph, node.outputs[0]))) {
    return refuse("the output does not have the input's element count");
  }
  return kYes;
}

SupportDecision check_identity(const Graph& graph, const Node& node) { return float32_static(graph, node); }

SupportDecision check_conv_transpose(const Graph& graph, const Node& node) {
  SupportDecision d = float32_static(graph, node);
  if (!d.supported) return d;
  const std::vector<int64_t>& x = dims(graph, node.inputs[0]);
  const std::vector<int64_t>& w = dims(graph, node.inputs[1]);
  const std::vector<int64_t>& y = dims(graph, node.outputs[0]);
  if (x.size() < 3 || x.size() > 5) return refuse("ConvTranspose of rank " + std::to_string(x.size()) + "; oneDNN has 1-D to 3-D");
  if (w.size() != x.size() || y.size() != x.size()) return refuse("weights or output of another rank than the input");
  if (!graph.is_constant(node.inputs[1])) return refuse("weights are not a constant");
  if (node.has_input(2) && !graph.is_constant(node.inputs[2])) return refuse("bias is not a constant");
  const DeconvolutionGeometry geometry = deconvolution_geometry(graph, node);
  if (!geometry.refusal.empty()) return refuse(geometry.refusal);
  const int64_t group = node.attrs.get_int_or("group", 1);
  if (group < 1 || w[0] % group != 0 || x[1] != w[0] || y[1] != w[1] * group) {
    return refuse("group, weights and channels do not agree");
  }
  return kYes;
}

std::optional<SliceSpec> constant_slice(const Graph& graph, const Node& node) {
  const Value& x = graph.value(node.inputs[0]);
  if (!x.type.is_static()) return std::nullopt;
  std::optional<std::vector<int64_t>> lists[4];  // starts, ends, axes, steps
  for (size_t i = 1; i < node.inputs.size() && i < 5; ++i) {
    if (!node.has_input(i)) continue;
    if (!graph.is_constant(node.inputs[i])) return std::nullopt;
    lists[i - 1] = graph.value(node.inputs[i]).constant->to_int64_vector();
  }
  if (!lists[0] || !lists[1]) return std::nullopt;
  SliceSpec spec;
  try {
    spec = resolve_slice(node, x.type.dims, *lists[0], *lists[1], lists[2], lists[3]);
  } catch (const Error&) {
    return std::nullopt;
  }
  for (int64_t step : spec.steps) {
    if (step != 1) return std::nullopt;
  }
  return spec;
}

SupportDecision check_slice(const Graph& graph, const Node& node) {
  SupportDecision d = float32_static(graph, node, 1);
  if (!d.supported) return d;
  if (!constant_slice(graph, node)) return refuse("starts, ends, axes and steps must be constants, with steps of 1");
  return kYes;
}

}  // namespace tessera::dnnl_backend
