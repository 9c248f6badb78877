// Lowering of the layout ops: Concat to oneDNN's concat (inputs keep their
// layouts, oneDNN picks the output's), Transpose to a reorder that reads a
// permuted view, Reshape / Flatten / Squeeze / Unsqueeze to a reorder that
// reads a reshaped view, Slice to a reorder that reads a sub-block (all from
// plain layout), and Identity to nothing: its output is the same slot as its input.
#include <map>
#include <optional>

#include "backends/dnnl/dnnl_declarations.h"
#include "backends/dnnl/dnnl_lowering.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {
namespace {

void lower_concat(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  const std::vector<int64_t> y_dims = dims_of(lowering.graph(), fused.outputs[0]);
  const int64_t rank = static_cast<int64_t>(y_dims.size());
  int64_t axis = node.attrs.get_int_or("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) lowering.unsupported(node, "axis out of range");
  Step step;
  step.kind = StepKind::kConcat;
  step.node = fused.region_node;
  step.ints = {axis};
  for (ValueId input : node.inputs) {
    if (input == kNoValue) lowering.unsupported(node, "an omitted input");
    step.inputs.push_back(lowering.slot_of(fused.region_value(input)));
  }
  // Inputs in different layouts (a Winograd convolution's nChw16c beside a
  // direct one's nhwc): oneDNN 2.6 answers `any` with the plain layout, whose
  // readers then run slow kernels (batch norm on nchw: ncsp_bnorm, 10-30x its
  // JIT kernel). The non-plain layout that holds most of the inputs' elements
  // is used for every input and the output instead; the others are reordered
  // into it. Most elements rather than the largest input: a DenseNet layer
  // concatenates its block's input (nhwc, the largest) and the features of the
  // layers before it (Winograd's nChw16c, more of them together); in nChw16c
  // those features are written in place into the block's one buffer
  // (dnnl_workspace.cc) and the concats copy nothing (DenseNet-121, Zen 5,
  // eight alternating runs: 28.5 -> 27.6 ms at 1 thread, 22.3 -> 21.0 at 2).
  std::vector<memory::desc> requests(step.inputs.size(), memory::desc());
  memory::desc output_request = any_desc(y_dims);
  std::map<int32_t, int64_t> elements;  // per non-plain format tag
  std::optional<int32_t> first_tag;
  bool mixed = false;
  for (int32_t slot : step.inputs) {
    const memory::desc& desc = lowering.desc(slot);
    if (desc.data.format_kind != dnnl_blocked) continue;
    const int32_t tag = format_tag_of(desc);
    if (!first_tag) first_tag = tag;
    mixed |= tag != *first_tag;
    if (!is_plain(desc) && tag > 0) elements[tag] += element_count(desc);
  }
  const memory::desc* most = nullptr;
  int64_t most_elements = 0;
  for (int32_t slot : step.inputs) {
    const memory::desc& desc = lowering.desc(slot);
    if (desc.data.format_kind != dnnl_blocked || is_plain(desc) || format_tag_of(desc) <= 0) continue;
    const int64_t held = elements[format_tag_of(desc)];
    if (held > most_elements) most = &desc, most_elements = held;
  }
  if (mixed && most != nullptr) {
    output_request = layout_like(*most, y_dims);
    for (size_t i = 0; i < step.inputs.size(); ++i) requests[i] = layout_like(*most, lowering.dims(step.inputs[i]));
  }
  lowering.add_step(std::move(step), requests, output_request, fused.outputs[0], y_dims);
}

}  // namespace

void lower_layout(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  if (!fused.tail.empty()) lowering.unsupported(node, "nothing fuses into " + node.op_type);
  if (node.op_type == "Concat") return lower_concat(lowering, fused);
  const int32_t input = lowering.slot_of(fused.region_value(node.inputs[0]));
  if (node.op_type == "Identity") return lowering.alias(fused.outputs[0], input);
  if (node.op_type == "Slice") {
    std::optional<SliceSpec> spec = constant_slice(lowering.graph(), node);
    if (!spec) lowering.unsupported(node, "Slice needs constant starts, ends, axes and steps of 1");
    lowering.add_subblock(fused.region_node, input, fused.outputs[0], spec->starts);
    return;
  }
  if (node.op_type == "Transpose") {
    const int64_t rank = static_cast<int64_t>(lowering.dims(input).size());
    std::vector<int64_t> permutation = node.attrs.get_ints_or("perm", {});
    if (permutation.empty()) {
      for (int64_t i = rank - 1; i >= 0; --i) permutation.push_back(i);  // ONNX's default: reverse the axes
    }
    if (static_cast<int64_t>(permutation.size()) != rank) lowering.unsupported(node, "perm does not have one entry per axis");
    lowering.add_view(fused.region_node, input, fused.outputs[0], permutation);
    return;
  }
  // Reshape, Flatten, Squeeze, Unsqueeze: the same elements in the same order.
  if (shape_numel(lowering.dims(input)) != shape_numel(dims_of(lowering.graph(), fused.outputs[0]))) {
    lowering.unsupported(node, "the output does not have the input's element count");
  }
  lowering.add_view(fused.region_node, input, fused.outputs[0]);
}

}  // namespace tessera::dnnl_backend
