// Small graph builders for the partitioner's tests (typed float32 values).
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera::testing_partition {

struct GraphBuilder {
  Graph graph;
  Shape shape = {2, 3};

  ValueId input(const std::string& name) {
    ValueId id = graph.add_value(name, TensorType::make(DType::kFloat32, shape));
    graph.inputs.push_back(id);
    return id;
  }
  ValueId constant(const std::string& name, Shape dims) { return graph.add_constant(name, Tensor(DType::kFloat32, dims)); }
  ValueId scalar(const std::string& name, float value) {
    Tensor t(DType::kFloat32, {});
    t.as<float>()[0] = value;
    return graph.add_constant(name, t);
  }
  /// A node with one output of the builder's shape, named op_type + index.
  ValueId node(const std::string& op_type, std::vector<ValueId> inputs) {
    const std::string name = op_type + "_" + std::to_string(graph.nodes.size());
    ValueId out = graph.add_value(name + "_out", TensorType::make(DType::kFloat32, shape));
    Node n;
    n.name = name;
    n.op_type = op_type;
    n.opset = 17;
    n.inputs = std::move(inputs);
    n.outputs = {out};
    graph.nodes.push_back(std::move(n));
    return out;
  }
  void output(ValueId id) { graph.outputs.push_back(id); }
};

}  // namespace tessera::testing_partition
