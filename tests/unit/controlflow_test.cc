// Control flow (If, Loop, Scan) built as ONNX models in memory: subgraphs that read
// outer values (captures, also through a nested subgraph), scan outputs, empty
// loops, and the importer's errors for names no graph defines.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "expect_error.h"
#include "frontend/onnx/onnx_importer.h"
#include "ir/error.h"
#include "onnx_proto_builder.h"
#include "runtime/session.h"

namespace tessera {
namespace {

using onnx::TensorProto;
using testing::add_graph_attr;
using testing::add_node;
using testing::add_value_info;
using testing::model_of;

void add_float_initializer(onnx::GraphProto* g, const std::string& name, std::vector<float> values) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::FLOAT);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (float v : values) t->add_float_data(v);
}

std::vector<Tensor> run_model(const onnx::ModelProto& model, const std::vector<Tensor>& inputs) {
  Graph graph = onnx_frontend::import_onnx_bytes(model.SerializeAsString(), "");
  auto compiled = CompiledModel::compile(std::move(graph), {});
  std::vector<TensorView> views;
  for (const Tensor& t : inputs) views.push_back(t.view());
  return compiled->run(views);
}

Tensor floats(Shape shape, std::vector<float> values) {
  Tensor t(DType::kFloat32, shape);
  std::copy(values.begin(), values.end(), t.as<float>());
  return t;
}
Tensor scalar_bool(bool v) {
  Tensor t(DType::kBool, {});
  *t.as<uint8_t>() = v;
  return t;
}
Tensor scalar_int64(int64_t v) {
  Tensor t(DType::kInt64, {});
  *t.as<int64_t>() = v;
  return t;
}
std::vector<float> values_of(const Tensor& t) { return std::vector<float>(t.as<float>(), t.as<float>() + t.numel()); }

/// If whose then-branch reads the outer values w and x, and whose else-branch
/// reads x and its own initializer c.
onnx::ModelProto if_model() {
  onnx::GraphProto g;
  add_value_info(g.mutable_input(), "cond", TensorProto::BOOL, {});
  add_value_info(g.mutable_input(), "x", TensorProto::FLOAT, {3});
  add_node(&g, "Add", {"x", "x"}, {"w"});
  onnx::GraphProto then_g;
  then_g.set_name("then");
  add_node(&then_g, "Add", {"w", "x"}, {"t"});
  add_value_info(then_g.mutable_output(), "t", TensorProto::FLOAT, {3});
  onnx::GraphProto else_g;
  else_g.set_name("else");
  add_float_initializer(&else_g, "c", {1, 2, 3});
  add_node(&else_g, "Sub", {"x", "c"}, {"e"});
  add_value_info(else_g.mutable_output(), "e", TensorProto::FLOAT, {3});
  auto* n = add_node(&g, "If", {"cond"}, {"y"});
  add_graph_attr(n, "then_branch", then_g);
  add_graph_attr(n, "else_branch", else_g);
  add_value_info(g.mutable_output(), "y", TensorProto::FLOAT, {3});
  return model_of(g);
}

TEST(ControlFlow, IfCapturesOuterValuesInOneOrder) {
  Graph graph = onnx_frontend::import_onnx_bytes(if_model().SerializeAsString(), "");
  const Node& node = graph.nodes.back();
  ASSERT_EQ(node.op_type, "If");
  EXPECT_EQ(node.attrs.get_int("tessera_formal_inputs"), 1);
  ASSERT_EQ(node.inputs.size(), 3u);  // cond, then the union of captures: w, x
  EXPECT_EQ(graph.value(node.inputs[1]).name, "w");
  EXPECT_EQ(graph.value(node.inputs[2]).name, "x");
  for (const char* branch : {"then_branch", "else_branch"}) {
    const Graph& sub = *node.attrs.find(branch)->graph;
    ASSERT_EQ(sub.inputs.size(), 2u) << branch;
    EXPECT_EQ(sub.value(sub.inputs[0]).name, "w") << branch;
    EXPECT_EQ(sub.value(sub.inputs[1]).name, "x") << branch;
  }
}

TEST(ControlFlow, IfRunsTheChosenBranch) {
  Tensor x = floats({3}, {1, -2, 5});
  EXPECT_EQ(values_of(run_model(if_model(), {scalar_bool(true), x})[0]), (std::vector<float>{3, -6, 15}));
  EXPECT_EQ(values_of(run_model(if_model(), {scalar_bool(false), x})[0]), (std::vector<float>{0, -4, 2}));
}

/// Loop: s += a each trip (a is an outer value), scan output = s after the trip.
/// With `nested`, the body adds a only while iteration < k (outer) and subtracts
/// it afterwards, through an If whose branches read the body's s_in and the
/// top-level a.
onnx::ModelProto loop_model(bool nested) {
  onnx::GraphProto g;
  add_value_info(g.mutable_input(), "M", TensorProto::INT64, {});
  add_value_info(g.mutable_input(), "s0", TensorProto::FLOAT, {2});
  add_value_info(g.mutable_input(), "a", TensorProto::FLOAT, {2});
  add_value_info(g.mutable_input(), "k", TensorProto::INT64, {});
  onnx::GraphProto body;
  body.set_name("body");
  add_value_info(body.mutable_input(), "i", TensorProto::INT64, {});
  add_value_info(body.mutable_input(), "cond_in", TensorProto::BOOL, {});
  add_value_info(body.mutable_input(), "s_in", TensorProto::FLOAT, {2});
  add_node(&body, "Identity", {"cond_in"}, {"cond_out"});
  if (nested) {
    add_node(&body, "Less", {"i", "k"}, {"early"});
    onnx::GraphProto then_g, else_g;
    add_node(&then_g, "Add", {"s_in", "a"}, {"plus"});
    add_value_info(then_g.mutable_output(), "plus", TensorProto::FLOAT, {2});
    add_node(&else_g, "Sub", {"s_in", "a"}, {"minus"});
    add_value_info(else_g.mutable_output(), "minus", TensorProto::FLOAT, {2});
    auto* n = add_node(&body, "If", {"early"}, {"s_out"});
    add_graph_attr(n, "then_branch", then_g);
    add_graph_attr(n, "else_branch", else_g);
  } else {
    add_node(&body, "Add", {"s_in", "a"}, {"s_out"});
  }
  add_node(&body, "Identity", {"s_out"}, {"scan"});
  add_value_info(body.mutable_output(), "cond_out", TensorProto::BOOL, {});
  add_value_info(body.mutable_output(), "s_out", TensorProto::FLOAT, {2});
  add_value_info(body.mutable_output(), "scan", TensorProto::FLOAT, {2});
  auto* n = add_node(&g, "Loop", {"M", "", "s0"}, {"s_final", "s_all"});
  add_graph_attr(n, "body", body);
  add_value_info(g.mutable_output(), "s_final", TensorProto::FLOAT, {2});
  g.add_output()->set_name("s_all");
  return model_of(g);
}

TEST(ControlFlow, LoopCapturesAndScans) {
  Tensor s0 = floats({2}, {1, 10});
  Tensor a = floats({2}, {2, -1});
  std::vector<Tensor> out = run_model(loop_model(false), {scalar_int64(4), s0, a, scalar_int64(0)});
  EXPECT_EQ(values_of(out[0]), (std::vector<float>{9, 6}));
  EXPECT_EQ(out[1].shape(), (Shape{4, 2}));
  EXPECT_EQ(values_of(out[1]), (std::vector<float>{3, 9, 5, 8, 7, 7, 9, 6}));
}

TEST(ControlFlow, EmptyLoopReturnsInitialValues) {
  Tensor s0 = floats({2}, {1, 10});
  Tensor a = floats({2}, {2, -1});
  std::vector<Tensor> out = run_model(loop_model(false), {scalar_int64(0), s0, a, scalar_int64(0)});
  EXPECT_EQ(values_of(out[0]), (std::vector<float>{1, 10}));
  EXPECT_EQ(out[1].shape(), (Shape{0, 2}));
}

TEST(ControlFlow, NestedIfInLoopBodyReadsBothEnclosingGraphs) {
  Graph graph = onnx_frontend::import_onnx_bytes(loop_model(true).SerializeAsString(), "");
  const Node& loop = graph.nodes.back();
  EXPECT_EQ(loop.attrs.get_int("tessera_formal_inputs"), 3);
  ASSERT_EQ(loop.inputs.size(), 5u);  // M, cond, s0, then captures k and a
  Tensor s0 = floats({2}, {1, 10});
  Tensor a = floats({2}, {2, -1});
  std::vector<Tensor> out = run_model(loop_model(true), {scalar_int64(5), s0, a, scalar_int64(2)});
  // Trips 0, 1 add a; trips 2, 3, 4 subtract it.
  EXPECT_EQ(values_of(out[0]), (std::vector<float>{-1, 11}));
  EXPECT_EQ(values_of(out[1]), (std::vector<float>{3, 9, 5, 8, 3, 9, 1, 10, -1, 11}));
}

TEST(ControlFlow, ScanReversedWithCaptureAndOutputAxis) {
  onnx::GraphProto g;
  add_value_info(g.mutable_input(), "s0", TensorProto::FLOAT, {2});
  add_value_info(g.mutable_input(), "x", TensorProto::FLOAT, {3, 2});
  add_value_info(g.mutable_input(), "a", TensorProto::FLOAT, {2});
  onnx::GraphProto body;
  add_value_info(body.mutable_input(), "s_in", TensorProto::FLOAT, {2});
  add_value_info(body.mutable_input(), "x_t", TensorProto::FLOAT, {2});
  add_node(&body, "Mul", {"x_t", "a"}, {"scaled"});
  add_node(&body, "Add", {"s_in", "scaled"}, {"s_out"});
  add_node(&body, "Identity", {"s_out"}, {"scan"});
  add_value_info(body.mutable_output(), "s_out", TensorProto::FLOAT, {2});
  add_value_info(body.mutable_output(), "scan", TensorProto::FLOAT, {2});
  auto* n = add_node(&g, "Scan", {"s0", "x"}, {"s_final", "s_all"});
  add_graph_attr(n, "body", body);
  auto* num = n->add_attribute();
  num->set_name("num_scan_inputs");
  num->set_type(onnx::AttributeProto::INT);
  num->set_i(1);
  auto* dirs = n->add_attribute();
  dirs->set_name("scan_input_directions");
  dirs->set_type(onnx::AttributeProto::INTS);
  dirs->add_ints(1);
  auto* axes = n->add_attribute();
  axes->set_name("scan_output_axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(1);
  add_value_info(g.mutable_output(), "s_final", TensorProto::FLOAT, {2});
  g.add_output()->set_name("s_all");
  std::vector<Tensor> out = run_model(model_of(g), {floats({2}, {0, 0}), floats({3, 2}, {1, 2, 3, 4, 5, 6}),
                                                    floats({2}, {1, 10})});
  // Rows are read last to first; the running sums are stacked along axis 1.
  EXPECT_EQ(values_of(out[0]), (std::vector<float>{9, 120}));
  EXPECT_EQ(out[1].shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of(out[1]), (std::vector<float>{5, 8, 9, 60, 100, 120}));
}

TEST(ControlFlow, UnknownNameInSubgraphIsAUserError) {
  onnx::ModelProto model = if_model();
  auto* then_g = model.mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_g();
  then_g->mutable_node(0)->set_input(1, "nowhere");
  EXPECT_USER_ERROR(onnx_frontend::import_onnx_bytes(model.SerializeAsString(), ""), "'nowhere'");
}

}  // namespace
}  // namespace tessera
