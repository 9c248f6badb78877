// See remove_no_ops.h.
#include "passes/remove_no_ops.h"

#include <algorithm>

namespace tessera {
namespace {

/// Input `i` of `node` is a constant scalar equal to `value`.
bool constant_scalar_is(const Graph& graph, const Node& node, size_t i, double value) {
  if (!node.has_input(i) || !graph.is_constant(node.inputs[i])) return false;
  const Tensor& t = *graph.value(node.inputs[i]).constant;
  return t.numel() == 1 && t.double_at(0) == value;
}

/// Why `node` computes nothing (its output 0 equals its input 0), or "".
/// `read`: per value, whether a node reads it or the graph outputs it.
std::string no_op_reason(const Graph& graph, const Node& node, const std::vector<char>& read) {
  if (!node.domain.empty() || node.inputs.empty() || node.inputs[0] == kNoValue || node.outputs.empty() ||
      node.outputs[0] == kNoValue) {
    return "";
  }
  for (size_t k = 1; k < node.outputs.size(); ++k) {
    if (node.outputs[k] != kNoValue && read[static_cast<size_t>(node.outputs[k])]) return "";  // Dropout's mask is read: keep it
  }
  const TensorType& in = graph.value(node.inputs[0]).type;
  const TensorType& out = graph.value(node.outputs[0]).type;
  if (node.op_type == "Identity") return "an Identity";
  if (node.op_type == "Dropout") {
    // A ratio of 0 keeps every element and scales by 1/(1-0), in training mode too: torchvision's Swin
    // exports its attention dropout that way (training_mode true, ratio 0), 24 nodes costing 8% of a run.
    if (constant_scalar_is(graph, node, 1, 0.0)) return "a Dropout of ratio 0";
    // training_mode: absent, or a constant false, or the node stays.
    if (node.has_input(2) && !constant_scalar_is(graph, node, 2, 0.0)) return "";
    return "a Dropout in inference";
  }
  if (node.op_type == "Cast" && in.is_tensor() && out.is_tensor() && in.dtype != DType::kUndefined && in.dtype == out.dtype) {
    return "a Cast to the type its input has";
  }
  return "";
}

}  // namespace

std::vector<RemovedNode> remove_no_ops(Graph& graph) {
  std::vector<RemovedNode> removed;
  std::vector<char> drop(graph.nodes.size(), 0);
  std::vector<char> read(graph.values.size(), 0);
  for (const Node& node : graph.nodes) {
    for (ValueId id : node.inputs) {
      if (id != kNoValue) read[static_cast<size_t>(id)] = 1;
    }
  }
  for (ValueId id : graph.outputs) read[static_cast<size_t>(id)] = 1;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    const std::string why = no_op_reason(graph, node, read);
    if (why.empty()) continue;
    const ValueId in = node.inputs[0], out = node.outputs[0];
    const bool out_is_output = std::find(graph.outputs.begin(), graph.outputs.end(), out) != graph.outputs.end();
    if (!out_is_output) {
      for (Node& reader : graph.nodes) {
        for (ValueId& id : reader.inputs) {
          if (id == out) id = in;
        }
      }
    } else {
      // The output must keep its name: the node that makes `in` writes it instead, if `in` is only an
      // intermediate (no graph input, constant or output).
      const bool in_is_boundary = graph.is_constant(in) ||
                                  std::find(graph.inputs.begin(), graph.inputs.end(), in) != graph.inputs.end() ||
                                  std::find(graph.outputs.begin(), graph.outputs.end(), in) != graph.outputs.end();
      Node* producer = nullptr;
      for (size_t j = 0; j < graph.nodes.size() && !in_is_boundary; ++j) {
        if (drop[j]) continue;
        for (ValueId id : graph.nodes[j].outputs) {
          if (id == in) producer = &graph.nodes[j];
        }
      }
      if (in_is_boundary || !producer) continue;
      for (ValueId& id : producer->outputs) {
        if (id == in) id = out;
      }
      for (Node& reader : graph.nodes) {
        for (ValueId& id : reader.inputs) {
          if (id == in) id = out;
        }
      }
    }
    drop[i] = 1;
    removed.push_back({node.name, node.op_type, "removed: " + why + " computes nothing"});
  }
  if (removed.empty()) return removed;
  std::vector<Node> kept;
  kept.reserve(graph.nodes.size() - removed.size());
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (!drop[i]) kept.push_back(std::move(graph.nodes[i]));
  }
  graph.nodes = std::move(kept);
  return removed;
}

}  // namespace tessera
