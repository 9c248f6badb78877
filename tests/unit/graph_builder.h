// Builds small graphs node by node for unit tests, filling attribute defaults
// from the op schemas as the ONNX importer does. Output types are left to
// shape inference. Shared by the oneDNN, NaN-semantics and partition-runtime
// tests (each used to define its own copy).
#pragma once
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/op_schema.h"
#include "test_util.h"

namespace tessera::testing {

struct GraphBuilder {
  Graph graph;
  int counter = 0;
  int opset = 17;

  /// A float32 graph input, named x0, x1, ... or as given.
  ValueId input(Shape shape) { return input("x" + std::to_string(counter++), std::move(shape)); }
  ValueId input(const std::string& name, Shape shape) {
    const ValueId id = graph.add_value(name, TensorType::make(DType::kFloat32, std::move(shape)));
    graph.inputs.push_back(id);
    return id;
  }
  ValueId constant(Tensor tensor) { return graph.add_constant("c" + std::to_string(counter++), std::move(tensor)); }
  ValueId scalar(float value) { return constant(make_float({}, {value})); }
  ValueId ints(std::vector<int64_t> values) {
    const int64_t n = static_cast<int64_t>(values.size());
    return constant(make_int64({n}, std::move(values)));
  }
  ValueId node(const std::string& op_type, std::vector<ValueId> inputs, AttributeMap attrs = {}) {
    Node node;
    node.name = op_type + "_" + std::to_string(counter++);
    node.op_type = op_type;
    node.opset = opset;
    node.inputs = std::move(inputs);
    node.attrs = std::move(attrs);
    if (const OpSchema* schema = OpRegistry::instance().find("", op_type)) {
      for (const AttributeSpec& spec : schema->attributes) {
        if (!node.attrs.has(spec.name) && spec.default_value) node.attrs.set(spec.name, *spec.default_value);
      }
    }
    const ValueId out = graph.add_value(node.name + "_out");
    node.outputs = {out};
    graph.nodes.push_back(std::move(node));
    return out;
  }
  void output(ValueId id) { graph.outputs.push_back(id); }
};

inline AttributeMap attributes(std::initializer_list<std::pair<const char*, Attribute>> entries) {
  AttributeMap map;
  for (const auto& [name, value] : entries) map.set(name, value);
  return map;
}

}  // namespace tessera::testing
