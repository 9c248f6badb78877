#include "passes/fuse_activations.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

namespace tessera {
namespace {

/// The clamp bounds an activation node stands for, or nullopt when it is not
/// a fusable Relu / Clip (Clip bounds must be constant scalars).
std::optional<std::pair<float, float>> clamp_bounds(const Graph& graph, const Node& node) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  if (!node.domain.empty()) return std::nullopt;
  if (node.op_type == "Relu") return std::make_pair(0.0f, kInf);
  if (node.op_type != "Clip") return std::nullopt;
  float bounds[2] = {-kInf, kInf};
  for (size_t i = 1; i < 3; ++i) {
    if (!node.has_input(i)) continue;
    const Value& v = graph.value(node.inputs[i]);
    if (!v.constant || v.constant->numel() != 1 || v.constant->dtype() != DType::kFloat32) return std::nullopt;
    bounds[i - 1] = v.constant->as<float>()[0];
  }
  if (node.attrs.has("min") || node.attrs.has("max")) return std::nullopt;  // legacy form: normalised away
  return std::make_pair(bounds[0], bounds[1]);
}

}  // namespace

void fuse_activations(Graph& graph) {
  const size_t n = graph.values.size();
  std::vector<int> readers(n, 0);
  std::vector<int> producer(n, -1);
  std::vector<char> is_graph_output(n, 0);
  for (ValueId id : graph.outputs) is_graph_output[static_cast<size_t>(id)] = 1;
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    for (ValueId id : graph.nodes[k].inputs) {
      if (id != kNoValue) ++readers[static_cast<size_t>(id)];
    }
    for (ValueId id : graph.nodes[k].outputs) {
      if (id != kNoValue) producer[static_cast<size_t>(id)] = static_cast<int>(k);
    }
  }
  std::vector<char> removed(graph.nodes.size(), 0);
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    Node& activation = graph.nodes[k];
    if (!activation.has_input(0) || !activation.has_output(0)) continue;
    const auto bounds = clamp_bounds(graph, activation);
    if (!bounds) continue;
    const size_t x = static_cast<size_t>(activation.inputs[0]);
    if (producer[x] < 0 || readers[x] != 1 || is_graph_output[x]) continue;
    Node& conv = graph.nodes[static_cast<size_t>(producer[x])];
    if (conv.op_type != "Conv" || !conv.domain.empty() || conv.attrs.has("tessera_clamp")) continue;
    if (graph.value(conv.outputs[0]).type.dtype != DType::kFloat32) continue;
    conv.attrs.set("tessera_clamp", Attribute::of_floats({bounds->first, bounds->second}));
    conv.fused.push_back({activation.name, activation.op_type});
    conv.outputs[0] = activation.outputs[0];
    removed[k] = 1;
  }
  if (std::find(removed.begin(), removed.end(), 1) == removed.end()) return;
  std::vector<Node> kept;
  kept.reserve(graph.nodes.size());
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    if (!removed[k]) kept.push_back(std::move(graph.nodes[k]));
  }
  graph.nodes = std::move(kept);
}

}  // namespace tessera
