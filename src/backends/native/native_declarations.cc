// What the native backend declares: every op that has a native kernel, and
// two fused patterns (see lower_composite in native_backend.cc): Conv→Relu /
// Conv→Clip (constant bounds), which its GEMM and depthwise epilogues apply,
// and the decomposed LayerNorm, which runs as one LayerNormalization.
#include "backends/native/native_declarations.h"

#include <limits>

#include "backends/native/kernel.h"
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

Declarations make_declarations() {
  Declarations d;
  d.any_op([](const Graph&, const Node& node) -> SupportDecision {
    if (KernelRegistry::instance().find(node.domain, node.op_type)) return {true, ""};
    return {false, "no native kernel for " + node.op_type};
  });
  Pattern conv = op("Conv");
  conv.where(float32_output);
  // Clip has one to three inputs (min and max optional, possibly omitted as "").
  auto bound = [] { return either({constant(), absent()}); };
  std::vector<Pattern> clips = {op("Clip", {conv}), op("Clip", {conv, bound()}), op("Clip", {conv, bound(), bound()})};
  for (Pattern& clip : clips) clip.where(constant_clip_bounds);
  d.pattern(kConvActivation, either({op("Relu", {conv}), clips[0], clips[1], clips[2]}));
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
