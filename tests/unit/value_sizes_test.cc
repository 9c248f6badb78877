// Sizes computed from input values at run time (Range, ConstantOfShape,
// Expand, Tile, OneHot, Resize, Pad, Slice, windows...): hostile values are
// user errors naming the node and op before anything is allocated, never a
// wrapped byte count; Range counts exactly at the int64 limits; a huge input
// shape fails before any backend sees it; opset-1 Concat's default axis.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <array>
#include <cmath>
#include <functional>
#include <limits>

#include "frontend/onnx/onnx_importer.h"
#include "ir/error.h"
#include "ir/op_schema.h"
#include "runtime/session.h"

namespace tessera {
namespace {

constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

Tensor scalar_int64(int64_t v) {
  Tensor t(DType::kInt64, {});
  t.as<int64_t>()[0] = v;
  return t;
}

Tensor scalar_int32(int32_t v) {
  Tensor t(DType::kInt32, {});
  t.as<int32_t>()[0] = v;
  return t;
}

Tensor scalar_float(float v) {
  Tensor t(DType::kFloat32, {});
  t.as<float>()[0] = v;
  return t;
}

Tensor int64s(std::vector<int64_t> values) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.as<int64_t>()[i] = values[i];
  return t;
}

Tensor floats(Shape shape, std::vector<float> values) {
  Tensor t(DType::kFloat32, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.as<float>()[i] = values[i];
  return t;
}

/// One node named `name` whose inputs are all graph inputs fed at run time
/// (so nothing is folded at compile time), run on the default backends.
struct OneNode {
  std::string op_type;
  int opset = 17;
  std::vector<Tensor> inputs;  // an undefined tensor: the input is omitted
  AttributeMap attrs;
  std::string name = "the_node";
};

std::vector<Tensor> run_node(const OneNode& spec) {
  Graph graph;
  Node node{.name = spec.name, .op_type = spec.op_type, .opset = spec.opset, .attrs = spec.attrs};
  std::vector<TensorView> feeds;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    const Tensor& t = spec.inputs[i];
    if (!t.defined()) {
      node.inputs.push_back(kNoValue);
      continue;
    }
    ValueId id = graph.add_value("in" + std::to_string(i), TensorType::make(t.dtype(), t.shape()));
    graph.inputs.push_back(id);
    node.inputs.push_back(id);
    feeds.push_back(t.view());
  }
  ValueId y = graph.add_value("y");
  node.outputs = {y};
  graph.outputs = {y};
  // As the importer does: attribute defaults, then the op's normalisation.
  const OpSchema* schema = OpRegistry::instance().find("", spec.op_type);
  for (const AttributeSpec& a : schema->attributes) {
    if (!node.attrs.has(a.name) && a.default_value) node.attrs.set(a.name, *a.default_value);
  }
  if (schema->normalize) schema->normalize(graph, node);
  graph.nodes.push_back(node);
  auto model = CompiledModel::compile(std::move(graph), {});
  return model->run(feeds);
}

/// `fn` throws a tessera user error whose message holds every part.
void expect_user_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "expected a user error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUser) << e.what();
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

void expect_size_error(const OneNode& spec) {
  SCOPED_TRACE(spec.op_type);
  expect_user_error([&] { run_node(spec); }, {"node 'the_node' (" + spec.op_type + ")", "too large"});
}

/// Range's values by stepping (an independent reference: no count formula).
std::vector<int64_t> range_by_stepping(int64_t start, int64_t limit, int64_t delta) {
  std::vector<int64_t> out;
  for (__int128 v = start; delta > 0 ? v < limit : v > limit; v += delta) out.push_back(static_cast<int64_t>(v));
  return out;
}

TEST(ValueSizes, RangeWithAHugeCountIsAUserError) {
  expect_size_error({.op_type = "Range", .inputs = {scalar_int64(0), scalar_int64(int64_t{1} << 61), scalar_int64(1)}});
  expect_size_error({.op_type = "Range", .inputs = {scalar_int64(kInt64Min), scalar_int64(kInt64Max), scalar_int64(1)}});
  expect_size_error({.op_type = "Range", .inputs = {scalar_float(0), scalar_float(1e30f), scalar_float(1)}});
}

TEST(ValueSizes, RangeCountsExactlyAtTheInt64Limits) {
  const std::vector<std::array<int64_t, 3>> cases = {
      {kInt64Min, kInt64Max, int64_t{1} << 62},  // 4 values
      {kInt64Max, kInt64Min, -(int64_t{1} << 62)},
      {kInt64Min, kInt64Max, kInt64Max},         // 3 values
      {kInt64Max, kInt64Min, kInt64Min},         // 1 value
      {kInt64Max - 2, kInt64Max, 1},
      {5, -6, -4},
      {0, 10, 3},
      {3, 3, 1},
      {3, 1, 1}};
  for (const auto& [start, limit, delta] : cases) {
    SCOPED_TRACE(std::to_string(start) + ", " + std::to_string(limit) + ", " + std::to_string(delta));
    std::vector<Tensor> out = run_node({.op_type = "Range", .inputs = {scalar_int64(start), scalar_int64(limit), scalar_int64(delta)}});
    const std::vector<int64_t> expected = range_by_stepping(start, limit, delta);
    ASSERT_EQ(out[0].shape(), Shape{static_cast<int64_t>(expected.size())});
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(out[0].as<int64_t>()[i], expected[i]) << i;
  }
  // int32 at its limits: the difference does not fit in int32.
  std::vector<Tensor> out = run_node({.op_type = "Range", .inputs = {scalar_int32(std::numeric_limits<int32_t>::min()),
                                                                     scalar_int32(std::numeric_limits<int32_t>::max()),
                                                                     scalar_int32(1 << 30)}});
  ASSERT_EQ(out[0].shape(), Shape{4});
  for (int i = 0; i < 4; ++i) {  // the expected value computed in int64: i * 2^30 overflows int32 from i = 2
    EXPECT_EQ(out[0].as<int32_t>()[i], static_cast<int32_t>(int64_t{std::numeric_limits<int32_t>::min()} + i * (int64_t{1} << 30)));
  }
}

TEST(ValueSizes, RangeWithANonFiniteFloatIsAUserError) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::pair<std::array<float, 3>, std::string>> cases = {
      {{0, inf, 1}, "limit"}, {{-inf, 0, 1}, "start"}, {{0, 1, nan}, "delta"}, {{0, 1, inf}, "delta"}};
  for (const auto& test_case : cases) {
    // Not a structured binding: clang 14 (the sanitizer build's compiler) cannot capture one in a lambda.
    const auto& values = test_case.first;
    const auto& which = test_case.second;
    expect_user_error([&] { run_node({.op_type = "Range", .inputs = {scalar_float(values[0]), scalar_float(values[1]), scalar_float(values[2])}}); },
                      {"node 'the_node' (Range)", which, "finite"});
  }
  // Finite floats still work.
  std::vector<Tensor> out = run_node({.op_type = "Range", .inputs = {scalar_float(1), scalar_float(2), scalar_float(0.25f)}});
  ASSERT_EQ(out[0].shape(), Shape{4});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[0].as<float>()[i], 1 + 0.25f * static_cast<float>(i));
}

TEST(ValueSizes, ShapesFromValuesAreCheckedBeforeAllocating) {
  const int64_t huge = int64_t{1} << 61;
  expect_size_error({.op_type = "ConstantOfShape", .inputs = {int64s({int64_t{1} << 62})}});
  expect_size_error({.op_type = "ConstantOfShape", .inputs = {int64s({1 << 20, 1 << 20, 1 << 20})}});
  expect_size_error({.op_type = "Expand", .inputs = {floats({1}, {1}), int64s({huge})}});
  expect_size_error({.op_type = "Tile", .inputs = {floats({1}, {1}), int64s({huge})}});
  expect_size_error({.op_type = "Tile", .inputs = {floats({3}, {1, 2, 3}), int64s({int64_t{1} << 62})}});  // 3 * 2^62 overflows
  Tensor values = floats({2}, {0, 1});
  expect_size_error({.op_type = "OneHot", .inputs = {int64s({0}), scalar_int64(huge), values}});
  expect_size_error({.op_type = "Pad", .inputs = {floats({4}, {1, 2, 3, 4}), int64s({int64_t{1} << 62, int64_t{1} << 62})}});
  expect_size_error({.op_type = "HannWindow", .inputs = {scalar_int64(huge)}});
  expect_size_error({.op_type = "MelWeightMatrix", .inputs = {scalar_int64(huge), scalar_int64(4), scalar_int64(8000),
                                                               scalar_float(0), scalar_float(100)}});
  Tensor image = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  expect_size_error({.op_type = "Resize", .opset = 13, .inputs = {image, Tensor(), Tensor(), int64s({1, 1, 1 << 30, 1 << 30})}});
  expect_size_error({.op_type = "Resize", .opset = 13, .inputs = {image, Tensor(), floats({4}, {1, 1, 1e30f, 1})}});
}

TEST(ValueSizes, BadValuesThatSizeOutputsAreUserErrors) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  Tensor image = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  for (float scale : {inf, nan, -1.0f}) {
    expect_user_error([&] { run_node({.op_type = "Resize", .opset = 13, .inputs = {image, Tensor(), floats({4}, {1, 1, scale, 1})}}); },
                      {"node 'the_node' (Resize)", "scale"});
    expect_user_error([&] { run_node({.op_type = "Upsample", .opset = 9, .inputs = {image, floats({4}, {1, 1, scale, 1})}}); },
                      {"node 'the_node' (Upsample)", "scale"});
  }
  expect_user_error([&] { run_node({.op_type = "Resize", .opset = 13, .inputs = {image, Tensor(), Tensor(), int64s({1, 1, -2, 2})}}); },
                    {"node 'the_node' (Resize)", "negative"});
  Tensor values = floats({2}, {0, 1});
  for (float depth : {inf, nan, 1e30f, -3.0f}) {
    expect_user_error([&] { run_node({.op_type = "OneHot", .opset = 11, .inputs = {int64s({0}), scalar_float(depth), values}}); },
                      {"node 'the_node' (OneHot)", "depth"});
  }
  // Negative pads may remove elements, but not more than the axis has (even if the other side adds them back).
  expect_user_error([&] { run_node({.op_type = "Pad", .inputs = {floats({4}, {1, 2, 3, 4}), int64s({-5, 3})}}); },
                    {"node 'the_node' (Pad)", "remove more than"});
  expect_user_error([&] { run_node({.op_type = "Pad", .inputs = {floats({4}, {1, 2, 3, 4}), int64s({kInt64Min, kInt64Max})}}); },
                    {"node 'the_node' (Pad)", "remove more than"});
  expect_user_error([&] { run_node({.op_type = "ConstantOfShape", .inputs = {int64s({2, -1})}}); },
                    {"node 'the_node' (ConstantOfShape)", "negative"});
}

TEST(ValueSizes, OutputsSizedFromValuesStillComputeRightValues) {
  // Tile, Pad and Expand from run-time values (reference written out by hand).
  std::vector<Tensor> tiled = run_node({.op_type = "Tile", .inputs = {floats({2}, {1, 2}), int64s({3})}});
  ASSERT_EQ(tiled[0].shape(), Shape{6});
  const float tile_expected[] = {1, 2, 1, 2, 1, 2};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(tiled[0].as<float>()[i], tile_expected[i]);
  std::vector<Tensor> padded = run_node({.op_type = "Pad", .inputs = {floats({4}, {1, 2, 3, 4}), int64s({-1, 2})}});
  ASSERT_EQ(padded[0].shape(), Shape{5});
  const float pad_expected[] = {2, 3, 4, 0, 0};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(padded[0].as<float>()[i], pad_expected[i]);
  Tensor values = floats({2}, {-1, 7});
  std::vector<Tensor> one_hot = run_node({.op_type = "OneHot", .opset = 11, .inputs = {int64s({2, -1}), scalar_float(3.5f), values}});
  ASSERT_EQ(one_hot[0].shape(), (Shape{2, 3}));
  const float one_hot_expected[] = {-1, -1, 7, -1, -1, 7};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(one_hot[0].as<float>()[i], one_hot_expected[i]);
}

TEST(ValueSizes, SliceWithExtremeStepsTakesOneElement) {
  Tensor x = floats({5}, {0, 1, 2, 3, 4});
  // step INT64_MAX: element 1 only; step INT64_MIN from the end: element 4 only.
  std::vector<Tensor> forward = run_node({.op_type = "Slice", .opset = 13,
                                          .inputs = {x, int64s({1}), int64s({kInt64Max}), int64s({0}), int64s({kInt64Max})}});
  ASSERT_EQ(forward[0].shape(), Shape{1});
  EXPECT_EQ(forward[0].as<float>()[0], 1);
  std::vector<Tensor> backward = run_node({.op_type = "Slice", .opset = 13,
                                           .inputs = {x, int64s({-1}), int64s({kInt64Min}), int64s({0}), int64s({kInt64Min})}});
  ASSERT_EQ(backward[0].shape(), Shape{1});
  EXPECT_EQ(backward[0].as<float>()[0], 4);
}

onnx::ModelProto relu_model(int64_t dim) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(14);
  auto* g = model.mutable_graph();
  auto* x = g->add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto* d = x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
  if (dim >= 0) d->set_dim_value(dim);
  else d->set_dim_param("n");
  auto* n = g->add_node();
  n->set_op_type("Relu");
  n->set_name("relu");
  n->add_input("x");
  n->add_output("y");
  g->add_output()->set_name("y");
  return model;
}

TEST(ValueSizes, AHugeInputShapeFailsBeforeAnyBackendSeesIt) {
  // On the default backends (oneDNN claims Relu) and on native alone: the same size error, naming the input.
  for (const std::vector<std::string>& backends : std::vector<std::vector<std::string>>{{}, {"native"}}) {
    for (bool by_symbol : {false, true}) {
      CompileOptions options;
      options.backends = backends;
      options.input_shapes[by_symbol ? "n" : "x"] = {1000000000000};
      expect_user_error([&] { CompiledModel::compile(onnx_frontend::import_onnx_bytes(relu_model(-1).SerializeAsString(), ""), options); },
                        {"input 'x'", "1000000000000", "too large"});
    }
    CompileOptions options;
    options.backends = backends;
    expect_user_error([&] { CompiledModel::compile(onnx_frontend::import_onnx_bytes(relu_model(1000000000000).SerializeAsString(), ""), options); },
                      {"input 'x'", "too large"});
  }
}

onnx::ModelProto concat_model(int opset, bool with_axis) {
  onnx::ModelProto model;
  model.set_ir_version(3);
  model.add_opset_import()->set_version(opset);
  auto* g = model.mutable_graph();
  for (auto [name, width] : {std::pair<const char*, int>{"a", 2}, {"b", 3}}) {
    auto* in = g->add_input();
    in->set_name(name);
    in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    auto* shape = in->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->add_dim()->set_dim_value(2);
    shape->add_dim()->set_dim_value(width);
  }
  auto* n = g->add_node();
  n->set_op_type("Concat");
  n->set_name("cat");
  n->add_input("a");
  n->add_input("b");
  n->add_output("y");
  if (with_axis) {
    auto* axis = n->add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(1);
  }
  g->add_output()->set_name("y");
  return model;
}

TEST(ValueSizes, OpsetOneConcatDefaultsToAxisOneOnEveryBackend) {
  Tensor a = floats({2, 2}, {1, 2, 3, 4});
  Tensor b = floats({2, 3}, {5, 6, 7, 8, 9, 10});
  const float expected[] = {1, 2, 5, 6, 7, 3, 4, 8, 9, 10};  // rows joined along axis 1
  for (const std::vector<std::string>& backends : std::vector<std::vector<std::string>>{{}, {"native"}, {"dnnl"}}) {
    SCOPED_TRACE(backends.empty() ? "default" : backends[0]);
    CompileOptions options;
    options.backends = backends;
    options.strict = !backends.empty();  // strict: the named backend must run Concat itself
    auto model = CompiledModel::compile(onnx_frontend::import_onnx_bytes(concat_model(1, false).SerializeAsString(), ""), options);
    ASSERT_EQ(model->placement()[0].backend, backends.empty() ? "dnnl" : backends[0]);
    std::vector<Tensor> out = model->run({a.view(), b.view()});
    ASSERT_EQ(out[0].shape(), (Shape{2, 5}));
    for (int i = 0; i < 10; ++i) EXPECT_EQ(out[0].as<float>()[i], expected[i]) << i;
  }
  // From opset 4 the axis is required.
  expect_user_error([] { onnx_frontend::import_onnx_bytes(concat_model(4, false).SerializeAsString(), ""); },
                    {"'cat'", "Concat", "axis", "required"});
  EXPECT_NO_THROW(onnx_frontend::import_onnx_bytes(concat_model(4, true).SerializeAsString(), ""));
}

}  // namespace
}  // namespace tessera
