// Small helpers for tests that write ONNX protos in memory (control flow,
// run allocations, compiled bodies in artifacts): value infos with static dims (a scalar: no dims), nodes,
// graph attributes and the model around a graph.
#pragma once
#include <onnx/onnx_pb.h>

#include <string>
#include <vector>

namespace tessera::testing {

inline void add_value_info(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name,
                           int elem_type, std::vector<int64_t> dims) {
  auto* v = list->Add();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

inline onnx::NodeProto* add_node(onnx::GraphProto* g, const std::string& op, std::vector<std::string> inputs,
                                 std::vector<std::string> outputs) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& i : inputs) n->add_input(i);
  for (auto& o : outputs) n->add_output(o);
  return n;
}

inline void add_graph_attr(onnx::NodeProto* n, const std::string& name, const onnx::GraphProto& g) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = g;
}

/// `g` as a model of IR version 8 and the default domain's `opset`.
inline onnx::ModelProto model_of(const onnx::GraphProto& g, int64_t opset = 13) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(opset);
  *model.mutable_graph() = g;
  return model;
}

}  // namespace tessera::testing
