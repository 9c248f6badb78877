// Shape computations with open dims (passes/shape_values.h): what infer_and_fold folds of a
// Shape -> Gather -> Concat -> Reshape chain when the tensor measured has an open dim, the constant
// target a Reshape gets (-1 for one unknown element, 0 where it copies its input's dim), and what
// it must leave computed; each model then runs at several shapes, zero-size ones among them, against
// the input's elements read in order (a Reshape moves none).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backends/native/native_backend.h"
#include "graph_builder.h"
#include "passes/infer_and_fold.h"
#include "runtime/session.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

/// The graph after shape inference, folding and dead-node removal.
Graph folded(Graph graph) {
  infer_and_fold(graph, evaluate_node_natively);
  eliminate_dead_nodes(graph);
  return graph;
}

const Node& only_node(const Graph& graph, const std::string& op_type) {
  const Node* found = nullptr;
  for (const Node& node : graph.nodes) {
    if (node.op_type == op_type) {
      EXPECT_EQ(found, nullptr) << "two " << op_type << " nodes";
      found = &node;
    }
  }
  if (!found) {
    std::string message = "no node of op ";
    message += op_type;
    throw std::runtime_error(message);
  }
  return *found;
}

int count_ops(const Graph& graph, const std::vector<std::string>& op_types) {
  return static_cast<int>(std::count_if(graph.nodes.begin(), graph.nodes.end(), [&](const Node& n) {
    return std::find(op_types.begin(), op_types.end(), n.op_type) != op_types.end();
  }));
}

/// The Reshape's target as folded, or nothing when it is still computed.
std::vector<int64_t> reshape_target(const Graph& graph) {
  const Node& reshape = only_node(graph, "Reshape");
  if (!graph.is_constant(reshape.inputs[1])) return {};
  return graph.value(reshape.inputs[1]).constant->to_int64_vector();
}

/// Runs `graph` (compiled once, open dims) at each input shape; output 0 must have `want(shape)` as
/// its dims and the input's elements (after Relu when `relu`) in order.
void expect_runs(const Graph& graph, const std::vector<Shape>& shapes, Shape (*want)(const Shape&), bool relu) {
  auto model = CompiledModel::compile(graph, CompileOptions{});
  for (const Shape& shape : shapes) {
    Tensor x = random_uniform(shape, 17, -1, 1);
    if (x.numel() > 0) x.as<float>()[0] = NAN;
    std::vector<Tensor> out = model->run({x.view()});
    ASSERT_EQ(out[0].shape(), want(shape)) << shape_to_string(shape);
    ASSERT_EQ(out[0].numel(), x.numel());
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float in = x.as<float>()[i];
      const float expected = relu && !std::isnan(in) ? std::max(in, 0.0f) : in;
      const float got = out[0].as<float>()[i];
      ASSERT_TRUE(got == expected || (std::isnan(got) && std::isnan(expected))) << i << ": " << got << " vs " << expected;
    }
  }
}

AttributeMap axis0() { return attributes({{"axis", Attribute::of_int(0)}}); }

TEST(ShapeValues, AComputedTargetWithOneOpenDimBecomesAConstantWithMinusOne) {
  // x[1, seq, 8] -> Relu -> Reshape to [seq, 8 / 4, 4], the target computed as torch's attention writes it.
  GraphBuilder b;
  const ValueId x = b.input("x", {1, -1, 8});
  b.graph.value(x).type.symbols = {"", "seq", ""};
  const ValueId shape = b.node("Shape", {x});
  const ValueId seq = b.node("Gather", {shape, b.constant(make_int64({}, {1}))}, axis0());
  const ValueId width = b.node("Gather", {shape, b.constant(make_int64({}, {2}))}, axis0());
  const ValueId half = b.node("Div", {width, b.constant(make_int64({}, {4}))});
  const ValueId target = b.node("Concat", {b.node("Unsqueeze", {seq, b.ints({0})}), b.node("Unsqueeze", {half, b.ints({0})}), b.ints({4})},
                                axis0());
  b.output(b.node("Reshape", {b.node("Relu", {x}), target}));
  const Graph after = folded(b.graph);
  EXPECT_EQ(reshape_target(after), (std::vector<int64_t>{-1, 2, 4}));
  EXPECT_EQ(count_ops(after, {"Shape", "Gather", "Div", "Unsqueeze", "Concat"}), 0);
  EXPECT_EQ(after.value(after.outputs[0]).type.dims, (Shape{-1, 2, 4}));
  expect_runs(b.graph, {{1, 5, 8}, {1, 1, 8}, {1, 0, 8}, {1, 37, 8}},
              [](const Shape& s) { return Shape{s[1], 2, 4}; }, true);
}

TEST(ShapeValues, TheTensorsOwnOpenDimsAreCopiedWithZero) {
  // x[batch, seq, 8] -> Reshape to Concat(Shape(x)[0:2], [2, 4]): both open dims are x's own.
  GraphBuilder b;
  const ValueId x = b.input("x", {-1, -1, 8});
  b.graph.value(x).type.symbols = {"batch", "seq", ""};
  const ValueId leading = b.node("Slice", {b.node("Shape", {x}), b.ints({0}), b.ints({2})});
  b.output(b.node("Reshape", {x, b.node("Concat", {leading, b.ints({2, 4})}, axis0())}));
  const Graph after = folded(b.graph);
  EXPECT_EQ(reshape_target(after), (std::vector<int64_t>{0, 0, 2, 4}));
  expect_runs(b.graph, {{2, 3, 8}, {1, 1, 8}, {3, 0, 8}, {0, 4, 8}},
              [](const Shape& s) { return Shape{s[0], s[1], 2, 4}; }, false);
}

TEST(ShapeValues, TwoUnknownElementsOrAnotherTensorsDimsStayComputed) {
  // The target copies x's open dims, but the Reshape reads Relu(x): 0 would copy the wrong tensor's
  // dims in general and -1 can stand for one element only, so the chain stays.
  GraphBuilder b;
  const ValueId x = b.input("x", {-1, -1, 8});
  b.graph.value(x).type.symbols = {"batch", "seq", ""};
  const ValueId leading = b.node("Slice", {b.node("Shape", {x}), b.ints({0}), b.ints({2})});
  b.output(b.node("Reshape", {b.node("Relu", {x}), b.node("Concat", {leading, b.ints({8})}, axis0())}));
  const Graph after = folded(b.graph);
  EXPECT_TRUE(reshape_target(after).empty());
  EXPECT_EQ(count_ops(after, {"Shape", "Slice", "Concat"}), 3);
  expect_runs(b.graph, {{2, 3, 8}, {1, 0, 8}}, [](const Shape& s) { return s; }, true);
}

TEST(ShapeValues, ArithmeticKeepsAnOpenDimOnlyThroughItsIdentity) {
  // [seq * 1 + 0, 8]: still x's own dim 0, so 0. [seq * 2, 4]: unknown, but the one such element, so
  // -1; its value is what the input's size implies. [seq - 1, 0]: a known 0 beside it, left computed.
  for (const std::string form : {"identity", "double", "minus_one_with_zero"}) {
    GraphBuilder b;
    const ValueId x = b.input("x", {-1, 8});
    b.graph.value(x).type.symbols = {"seq", ""};
    const ValueId seq = b.node("Gather", {b.node("Shape", {x}), b.ints({0})}, axis0());
    ValueId lead = seq;
    std::vector<int64_t> rest{8};
    if (form == "identity") lead = b.node("Add", {b.node("Mul", {seq, b.ints({1})}), b.ints({0})});
    if (form == "double") lead = b.node("Mul", {seq, b.ints({2})}), rest = {4};
    if (form == "minus_one_with_zero") lead = b.node("Sub", {seq, b.ints({1})}), rest = {0};
    b.output(b.node("Reshape", {x, b.node("Concat", {lead, b.ints(rest)}, axis0())}));
    const Graph after = folded(b.graph);
    if (form == "minus_one_with_zero") {
      EXPECT_TRUE(reshape_target(after).empty()) << form;
      continue;
    }
    EXPECT_EQ(reshape_target(after), (std::vector<int64_t>{form == "identity" ? 0 : -1, rest[0]})) << form;
    if (form == "identity") {
      expect_runs(b.graph, {{3, 8}, {0, 8}}, [](const Shape& s) { return s; }, false);
    } else {
      expect_runs(b.graph, {{3, 8}, {0, 8}}, [](const Shape& s) { return Shape{s[0] * 2, 4}; }, false);
    }
  }
}

TEST(ShapeValues, AStaticDimReadThroughShapeFoldsWhateverTheOpenOnes) {
  // Gather(Shape(x), -1) of x[seq, 6] is 6 for every input, and a Slice whose end it computes gets
  // constant bounds.
  GraphBuilder b;
  const ValueId x = b.input("x", {-1, 6});
  b.graph.value(x).type.symbols = {"seq", ""};
  const ValueId last = b.node("Gather", {b.node("Shape", {x}), b.ints({-1})}, axis0());
  const ValueId end = b.node("Div", {last, b.ints({3})});
  b.output(b.node("Slice", {x, b.ints({0}), end, b.ints({1})}));
  const Graph after = folded(b.graph);
  const Node& slice = only_node(after, "Slice");
  ASSERT_TRUE(after.is_constant(slice.inputs[2]));
  EXPECT_EQ(after.value(slice.inputs[2]).constant->to_int64_vector(), (std::vector<int64_t>{2}));
  EXPECT_EQ(after.value(after.outputs[0]).type.dims, (Shape{-1, 2}));
  auto model = CompiledModel::compile(b.graph, CompileOptions{});
  for (int64_t rows : {4, 1, 0}) {
    Tensor xin = random_uniform({rows, 6}, 3, -1, 1);
    Tensor out = model->run({xin.view()})[0];
    ASSERT_EQ(out.shape(), (Shape{rows, 2}));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < 2; ++c) EXPECT_EQ(out.as<float>()[r * 2 + c], xin.as<float>()[r * 6 + c]);
    }
  }
}

}  // namespace
}  // namespace tessera::testing
