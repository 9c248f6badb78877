#include "ir/specialize_shapes.h"

#include <memory>

#include "ir/error.h"
#include "ir/op_schema.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

bool is_composite(const Node& node) { return node.domain == "tessera" && node.op_type == "Composite"; }

/// Infers every node's outputs of `graph` (inputs already typed), in order.
void infer_all(Graph& graph) {
  for (Node& node : graph.nodes) {
    if (is_composite(node)) {
      const Attribute* body = node.attrs.find("body");
      if (!body || !body->graph || body->graph->inputs.size() != node.inputs.size()) {
        throw_user_error(node.describe(), ": composite without a usable body");
      }
      auto copy = std::make_shared<Graph>(*body->graph);  // the original's body is shared with it
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i] == kNoValue) continue;
        copy->value(copy->inputs[i]).type = graph.value(node.inputs[i]).type;
      }
      infer_all(*copy);
      for (size_t i = 0; i < node.outputs.size() && i < copy->outputs.size(); ++i) {
        if (node.outputs[i] != kNoValue) graph.value(node.outputs[i]).type = copy->value(copy->outputs[i]).type;
      }
      Attribute replaced = *body;
      replaced.graph = std::move(copy);
      node.attrs.set("body", std::move(replaced));
      continue;
    }
    const OpSchema* schema = OpRegistry::instance().find(node.domain, node.op_type);
    if (!schema) throw_unsupported(node.describe(), ": unknown op");
    std::vector<TensorType> outputs = infer_node_outputs(graph, node, *schema);
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] == kNoValue) continue;
      Value& out = graph.value(node.outputs[i]);
      if (!out.constant) out.type = outputs[i];
    }
  }
}

}  // namespace

Graph specialize_shapes(const Graph& graph, const std::vector<Shape>& input_dims) {
  if (input_dims.size() != graph.inputs.size()) {
    throw_internal_error("specialize_shapes: ", input_dims.size(), " shapes for ", graph.inputs.size(), " inputs");
  }
  Graph out = graph;
  for (size_t i = 0; i < graph.inputs.size(); ++i) {
    Value& v = out.value(graph.inputs[i]);
    if (!v.type.is_tensor()) throw_unsupported("input '", v.name, "' is not a tensor: its shape cannot be specialised");
    const Shape& dims = input_dims[i];
    bool fits = !v.type.rank_known || v.type.rank() == static_cast<int64_t>(dims.size());
    for (size_t d = 0; fits && v.type.rank_known && d < dims.size(); ++d) fits = v.type.dims[d] < 0 || v.type.dims[d] == dims[d];
    if (!fits) {
      throw_user_error("input '", v.name, "' is ", v.type.to_string(), ", but a value of shape ", shape_to_string(dims),
                       " was given");
    }
    check_tensor_size("input '" + v.name + "'", dims, v.type.dtype);
    v.type.rank_known = true;
    v.type.dims = dims;
  }
  infer_all(out);
  return out;
}

bool all_shapes_static(const Graph& graph) {
  for (const Value& v : graph.values) {
    if (v.type.is_tensor() && !v.constant && !v.type.is_static()) return false;
  }
  for (const Node& node : graph.nodes) {
    if (!is_composite(node)) continue;
    const Attribute* body = node.attrs.find("body");
    if (body && body->graph && !all_shapes_static(*body->graph)) return false;
  }
  return true;
}

}  // namespace tessera
