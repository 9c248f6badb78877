// Helpers for the test backend's tests (see test_backend_helpers.h).
#include "backends/test_backend_helpers.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/native/native_backend.h"
#include "ir/error.h"

namespace tessera::testing {

Tensor random_tensor(Shape shape, uint32_t seed, float low, float high) {
  Tensor tensor(DType::kFloat32, std::move(shape));
  uint32_t state = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < tensor.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    const float unit = static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
    tensor.as<float>()[i] = low + (high - low) * unit;
  }
  return tensor;
}

Tensor float_tensor(Shape shape, std::vector<float> values) {
  Tensor tensor(DType::kFloat32, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(tensor.numel()), values.size());
  std::memcpy(tensor.data(), values.data(), tensor.nbytes());
  return tensor;
}

Tensor int64_tensor(Shape shape, std::vector<int64_t> values) {
  Tensor tensor(DType::kInt64, std::move(shape));
  EXPECT_EQ(static_cast<size_t>(tensor.numel()), values.size());
  std::memcpy(tensor.data(), values.data(), tensor.nbytes());
  return tensor;
}

ValueId GraphBuilder::input(const std::string& name, Shape shape, DType dtype) {
  const ValueId id = graph_.add_value(name, TensorType::make(dtype, std::move(shape)));
  graph_.inputs.push_back(id);
  return id;
}

ValueId GraphBuilder::constant(const std::string& name, Tensor tensor) {
  const ValueId id = graph_.add_constant(name, tensor);
  graph_.value(id).type = TensorType::make(tensor.dtype(), tensor.shape());
  return id;
}

ValueId GraphBuilder::node(const std::string& op_type, std::vector<ValueId> inputs, Shape output_shape,
                           AttributeMap attrs, DType dtype) {
  const int index = counter_++;
  Node node;
  node.name = op_type + "_" + std::to_string(index);
  node.op_type = op_type;
  node.opset = 17;
  node.inputs = std::move(inputs);
  node.attrs = std::move(attrs);
  const ValueId output = graph_.add_value(node.name + "_out", TensorType::make(dtype, std::move(output_shape)));
  node.outputs = {output};
  graph_.nodes.push_back(std::move(node));
  return output;
}

Graph make_composite(const Graph& graph, const std::vector<size_t>& members, const std::string& pattern,
                     bool reverse_inputs) {
  auto is_member = [&](size_t index) { return std::find(members.begin(), members.end(), index) != members.end(); };
  std::vector<char> produced_inside(graph.values.size(), 0);
  for (size_t index : members) {
    for (ValueId id : graph.nodes[index].outputs) produced_inside[static_cast<size_t>(id)] = 1;
  }
  std::vector<ValueId> outside_inputs;
  for (size_t index : members) {
    for (ValueId id : graph.nodes[index].inputs) {
      if (id == kNoValue || produced_inside[static_cast<size_t>(id)]) continue;
      if (std::find(outside_inputs.begin(), outside_inputs.end(), id) == outside_inputs.end()) {
        outside_inputs.push_back(id);
      }
    }
  }
  if (reverse_inputs) std::reverse(outside_inputs.begin(), outside_inputs.end());

  // The body: its own values, the composite's inputs first (as plain inputs:
  // the backend must find constants through the composite's inputs).
  auto body = std::make_shared<Graph>();
  std::map<ValueId, ValueId> to_body;
  for (ValueId id : outside_inputs) {
    const ValueId body_id = body->add_value(graph.value(id).name, graph.value(id).type);
    body->inputs.push_back(body_id);
    to_body[id] = body_id;
  }
  for (size_t index : members) {
    Node copy = graph.nodes[index];
    for (ValueId& id : copy.inputs) id = to_body.at(id);
    for (ValueId& id : copy.outputs) {
      const ValueId body_id = body->add_value(graph.value(id).name, graph.value(id).type);
      to_body[id] = body_id;
      id = body_id;
    }
    body->nodes.push_back(std::move(copy));
  }
  const Node& root = graph.nodes[members.back()];
  body->outputs = {to_body.at(root.outputs[0])};

  Graph result = graph;
  result.nodes.clear();
  for (size_t index = 0; index < graph.nodes.size(); ++index) {
    if (!is_member(index)) {
      result.nodes.push_back(graph.nodes[index]);
      continue;
    }
    if (index != members.back()) continue;
    Node composite;
    composite.name = "composite_" + pattern;
    composite.op_type = "Composite";
    composite.domain = "tessera";
    composite.inputs = outside_inputs;
    composite.outputs = root.outputs;
    composite.attrs.set("pattern", Attribute::of_string(pattern));
    Attribute body_attribute;
    body_attribute.kind = Attribute::Kind::kGraph;
    body_attribute.graph = body;
    composite.attrs.set("body", body_attribute);
    result.nodes.push_back(std::move(composite));
  }
  return result;
}

std::vector<Tensor> evaluate_reference(const Graph& graph, const std::vector<Tensor>& inputs) {
  std::map<ValueId, Tensor> values;
  for (size_t i = 0; i < graph.inputs.size(); ++i) values[graph.inputs[i]] = inputs.at(i);
  for (size_t id = 0; id < graph.values.size(); ++id) {
    if (graph.values[id].constant) values[static_cast<ValueId>(id)] = *graph.values[id].constant;
  }
  for (const Node& node : graph.nodes) {
    std::vector<const Tensor*> node_inputs;
    for (ValueId id : node.inputs) node_inputs.push_back(id == kNoValue ? nullptr : &values.at(id));
    std::vector<Tensor> outputs = evaluate_node_natively(node, node_inputs);
    for (size_t i = 0; i < node.outputs.size(); ++i) values[node.outputs[i]] = outputs[i];
  }
  std::vector<Tensor> result;
  for (ValueId id : graph.outputs) result.push_back(values.at(id));
  return result;
}

DeviceStore::DeviceStore(const Graph& region, MemorySpace& space, const std::vector<Tensor>& inputs,
                         bool preallocate_outputs)
    : region_(region), space_(space), views_(region.values.size()), owned_(region.values.size(), nullptr) {
  for (size_t id = 0; id < region.values.size(); ++id) {
    const Value& value = region.values[id];
    const bool is_input =
        std::find(region.inputs.begin(), region.inputs.end(), static_cast<ValueId>(id)) != region.inputs.end();
    if (value.constant) {
      views_[id] = value.constant->view();  // constants stay host tensors, as in the runtime
    } else if (preallocate_outputs || is_input) {
      views_[id].dtype = value.type.dtype;
      views_[id].shape = value.type.dims;
      allocate(static_cast<ValueId>(id));
    }
  }
  for (size_t i = 0; i < region.inputs.size(); ++i) {
    const TensorView& view = views_[static_cast<size_t>(region.inputs[i])];
    EXPECT_EQ(view.shape, inputs.at(i).shape());
    space_.copy_from_host(view.data, inputs.at(i).data(), inputs.at(i).nbytes());
  }
}

DeviceStore::~DeviceStore() {
  for (void* data : owned_) space_.deallocate(data);
}

const TensorView& DeviceStore::get(ValueId id) { return views_.at(static_cast<size_t>(id)); }

TensorView& DeviceStore::output(ValueId id) { return views_.at(static_cast<size_t>(id)); }

void DeviceStore::allocate(ValueId id) {
  TensorView& view = views_.at(static_cast<size_t>(id));
  space_.deallocate(owned_[static_cast<size_t>(id)]);
  owned_[static_cast<size_t>(id)] = space_.allocate(view.nbytes());
  view.data = owned_[static_cast<size_t>(id)];
}

Tensor DeviceStore::read(ValueId id) const {
  const TensorView& view = views_.at(static_cast<size_t>(id));
  Tensor host(view.dtype, view.shape);
  space_.copy_to_host(host.data(), view.data, host.nbytes());
  return host;
}

void DeviceStore::hand_host_memory_for_input(size_t index, const Tensor& host) {
  views_[static_cast<size_t>(region_.inputs.at(index))].data = host.data();
}

std::vector<Tensor> run_on_device(const ExecutableRegion& executable, const Graph& region, MemorySpace& space,
                                  const std::vector<Tensor>& inputs, bool preallocate_outputs) {
  DeviceStore store(region, space, inputs, preallocate_outputs);
  executable.run(store);
  std::vector<Tensor> outputs;
  for (ValueId id : region.outputs) outputs.push_back(store.read(id));
  return outputs;
}

void expect_near_tensor(const Tensor& actual, const Tensor& expected, double atol, double rtol) {
  ASSERT_EQ(actual.dtype(), expected.dtype());
  ASSERT_EQ(actual.shape(), expected.shape());
  for (int64_t i = 0; i < actual.numel(); ++i) {
    const double a = actual.double_at(i);
    const double e = expected.double_at(i);
    ASSERT_LE(std::fabs(a - e), atol + rtol * std::fabs(e)) << "element " << i << ": " << a << " vs " << e;
  }
}

}  // namespace tessera::testing
