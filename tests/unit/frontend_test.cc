// ONNX frontend: typed and raw initializers, Constant nodes, optional inputs,
// metadata, freezing weights or keeping them as inputs.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "frontend/onnx/onnx_importer.h"
#include "ir/error.h"
#include "runtime/session.h"

namespace tessera {
namespace {

onnx::ModelProto add_model_with_weight(bool raw) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("unit-test");
  auto* prop = model.add_metadata_props();
  prop->set_key("author");
  prop->set_value("tessera");
  model.add_opset_import()->set_version(13);
  auto* g = model.mutable_graph();
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(3);
  auto* w = g->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  float values[3] = {1.5f, -2.0f, 4.0f};
  if (raw) {
    w->set_raw_data(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  } else {
    for (float v : values) w->add_float_data(v);
  }
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("x");
  n->add_input("w");
  n->add_output("y");
  g->add_output()->set_name("y");
  return model;
}

std::vector<float> run(Graph graph, std::vector<Tensor> inputs) {
  auto model = CompiledModel::compile(std::move(graph), {});
  std::vector<TensorView> views;
  for (auto& t : inputs) views.push_back(t.view());
  Tensor y = model->run(views)[0];
  return std::vector<float>(y.as<float>(), y.as<float>() + y.numel());
}

Tensor ones(Shape shape) {
  Tensor t(DType::kFloat32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = 1;
  return t;
}

TEST(Frontend, TypedAndRawInitializersAgree) {
  for (bool raw : {false, true}) {
    Graph g = onnx_frontend::import_onnx_bytes(add_model_with_weight(raw).SerializeAsString(), "");
    EXPECT_EQ(g.metadata.at("producer_name"), "unit-test");
    EXPECT_EQ(g.metadata.at("author"), "tessera");
    EXPECT_EQ(g.nodes[0].name, "Add_0");  // unnamed nodes get a name
    EXPECT_EQ(run(g, {ones({3})}), (std::vector<float>{2.5f, -1.0f, 5.0f}));
  }
}

TEST(Frontend, WeightsCanStayInputs) {
  onnx::ModelProto model = add_model_with_weight(true);
  auto* w_input = model.mutable_graph()->add_input();
  w_input->set_name("w");
  w_input->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  onnx_frontend::ImportOptions keep;
  keep.freeze_weights = false;
  Graph kept = onnx_frontend::import_onnx_bytes(model.SerializeAsString(), "", keep);
  ASSERT_EQ(kept.inputs.size(), 2u);
  EXPECT_EQ(run(kept, {ones({3}), ones({3})}), (std::vector<float>{2, 2, 2}));
  Graph frozen = onnx_frontend::import_onnx_bytes(model.SerializeAsString(), "");
  EXPECT_EQ(frozen.inputs.size(), 1u);
}

TEST(Frontend, ConstantNodeAndFolding) {
  onnx::ModelProto model = add_model_with_weight(true);
  auto* g = model.mutable_graph();
  // w2 = Constant(value_floats), y2 = Add(w, w2) folds at compile time.
  auto* c = g->add_node();
  c->set_op_type("Constant");
  c->add_output("w2");
  auto* a = c->add_attribute();
  a->set_name("value_floats");
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float v : {1.0f, 1.0f, 1.0f}) a->add_floats(v);
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("w");
  n->add_input("w2");
  n->add_output("y2");
  g->add_output()->set_name("y2");
  Graph graph = onnx_frontend::import_onnx_bytes(model.SerializeAsString(), "");
  auto compiled = CompiledModel::compile(graph, {});
  EXPECT_EQ(compiled->graph().nodes.size(), 1u);  // only x + w is left to run
  Tensor x = ones({3});
  auto out = compiled->run({x.view()});
  EXPECT_EQ(out[1].as<float>()[0], 2.5f);
}

}  // namespace
}  // namespace tessera
