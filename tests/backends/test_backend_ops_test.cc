// The test backend's ops and fused patterns, each run end to end (compile →
// payload → load → run on test-device memory) and compared with the native
// backend's kernels on random data, with broadcasting shapes.
#include <gtest/gtest.h>

#include "backends/test_backend_helpers.h"
#include "backends/testing/test_backend.h"
#include "ir/error.h"
#include "unit/expect_error.h"

namespace tessera::testing {
namespace {

/// Compiles `region` on the test backend, runs it on `inputs` and compares
/// every output with the native reference on `reference` (the same graph
/// without composites; `region` itself when omitted). Checks nothing leaks.
void expect_matches_native(const Graph& region, const std::vector<Tensor>& inputs, const Graph* reference = nullptr,
                           double tolerance = 1e-5) {
  const TestDeviceStats before = test_device_stats();
  {
    std::unique_ptr<Backend> backend = make_test_backend();
    CompiledRegion compiled = backend->compile(region, RegionOptions{});
    ASSERT_TRUE(compiled.executable);
    ASSERT_FALSE(compiled.payload.empty());
    for (bool preallocate : {true, false}) {
      std::vector<Tensor> actual =
          run_on_device(*compiled.executable, region, *backend->memory_space(), inputs, preallocate);
      std::vector<Tensor> expected = evaluate_reference(reference ? *reference : region, inputs);
      ASSERT_EQ(actual.size(), expected.size());
      for (size_t i = 0; i < actual.size(); ++i) {
        SCOPED_TRACE("output " + std::to_string(i) + (preallocate ? " (planned)" : " (allocated by the backend)"));
        expect_near_tensor(actual[i], expected[i], tolerance, tolerance);
      }
    }
  }
  const TestDeviceStats after = test_device_stats();
  EXPECT_EQ(after.live_allocations, before.live_allocations);
  EXPECT_EQ(after.live_bytes, before.live_bytes);
}

AttributeMap attrs_of(std::initializer_list<std::pair<std::string, Attribute>> entries) {
  AttributeMap attrs;
  for (const auto& [name, value] : entries) attrs.set(name, value);
  return attrs;
}

TEST(TestBackendOps, UnaryOpsMatchNative) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Exp"}) {
    SCOPED_TRACE(op);
    GraphBuilder b;
    const ValueId x = b.input("x", {2, 3, 4});
    b.output(b.node(op, {x}, {2, 3, 4}));
    expect_matches_native(b.graph(), {random_tensor({2, 3, 4}, 1, -3, 3)});
  }
}

TEST(TestBackendOps, BinaryOpsBroadcastLikeNative) {
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {{{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}, {2, 3, 4}}, {{2, 1, 4}, {3, 1}, {2, 3, 4}},
                        {{1}, {2, 3}, {2, 3}},             {{5, 1, 1, 2}, {1, 3, 1}, {5, 1, 3, 2}}, {{}, {3}, {3}}};
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(op) + " " + shape_to_string(c.a) + " with " + shape_to_string(c.b));
      GraphBuilder b;
      const ValueId x = b.input("a", c.a);
      const ValueId y = b.input("b", c.b);
      b.output(b.node(op, {x, y}, c.out));
      // Divisors kept away from zero.
      expect_matches_native(b.graph(), {random_tensor(c.a, 2), random_tensor(c.b, 3, 0.5f, 2.0f)});
    }
  }
}

TEST(TestBackendOps, MatMulWithBatchBroadcastingMatchesNative) {
  struct Case {
    Shape a, b, out;
  };
  const Case cases[] = {{{3, 4}, {4, 2}, {3, 2}},
                        {{2, 3, 4}, {4, 5}, {2, 3, 5}},
                        {{4, 5}, {2, 5, 3}, {2, 4, 3}},
                        {{2, 1, 3, 4}, {3, 4, 5}, {2, 3, 3, 5}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_to_string(c.a) + " x " + shape_to_string(c.b));
    GraphBuilder b;
    const ValueId x = b.input("a", c.a);
    const ValueId y = b.input("b", c.b);
    b.output(b.node("MatMul", {x, y}, c.out));
    expect_matches_native(b.graph(), {random_tensor(c.a, 4), random_tensor(c.b, 5)});
  }
}

TEST(TestBackendOps, GemmMatchesNativeForEveryTransposeAlphaBetaAndC) {
  const int64_t m = 3, k = 4, n = 5;
  for (int trans_a = 0; trans_a < 2; ++trans_a) {
    for (int trans_b = 0; trans_b < 2; ++trans_b) {
      for (const Shape& c_shape : std::vector<Shape>{{n}, {m, 1}, {m, n}, {}, {1, n}}) {
        for (bool with_c : {true, false}) {
          if (!with_c && c_shape != Shape{n}) continue;
          SCOPED_TRACE("transA=" + std::to_string(trans_a) + " transB=" + std::to_string(trans_b) +
                       (with_c ? " C " + shape_to_string(c_shape) : " no C"));
          GraphBuilder b;
          const Shape a_shape = trans_a ? Shape{k, m} : Shape{m, k};
          const Shape b_shape = trans_b ? Shape{n, k} : Shape{k, n};
          const ValueId x = b.input("a", a_shape);
          const ValueId w = b.constant("w", random_tensor(b_shape, 6));
          std::vector<ValueId> inputs = {x, w};
          if (with_c) inputs.push_back(b.constant("c", random_tensor(c_shape, 7)));
          b.output(b.node("Gemm", inputs, {m, n},
                          attrs_of({{"transA", Attribute::of_int(trans_a)},
                                    {"transB", Attribute::of_int(trans_b)},
                                    {"alpha", Attribute::of_float(0.75f)},
                                    {"beta", Attribute::of_float(-1.5f)}})));
          expect_matches_native(b.graph(), {random_tensor(a_shape, 8)});
        }
      }
    }
  }
}

TEST(TestBackendOps, SoftmaxOnEachAxisMatchesNative) {
  for (int64_t axis : {-1, 0, 1, 2, -3}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    GraphBuilder b;
    const ValueId x = b.input("x", {2, 3, 4});
    b.output(b.node("Softmax", {x}, {2, 3, 4}, attrs_of({{"axis", Attribute::of_int(axis)}})));
    expect_matches_native(b.graph(), {random_tensor({2, 3, 4}, 9, -4, 4)});
  }
}

TEST(TestBackendOps, TransposeReshapeAndFlattenMatchNative) {
  {
    GraphBuilder b;
    const ValueId x = b.input("x", {2, 3, 4});
    b.output(b.node("Transpose", {x}, {4, 2, 3}, attrs_of({{"perm", Attribute::of_ints({2, 0, 1})}})));
    expect_matches_native(b.graph(), {random_tensor({2, 3, 4}, 10)});
  }
  {
    GraphBuilder b;  // default perm: reversed
    const ValueId x = b.input("x", {2, 3, 4});
    b.output(b.node("Transpose", {x}, {4, 3, 2}));
    expect_matches_native(b.graph(), {random_tensor({2, 3, 4}, 11)});
  }
  {
    GraphBuilder b;
    const ValueId x = b.input("x", {2, 3, 4});
    const ValueId shape = b.constant("shape", int64_tensor({2}, {4, -1}));
    b.output(b.node("Reshape", {x, shape}, {4, 6}));
    expect_matches_native(b.graph(), {random_tensor({2, 3, 4}, 12)});
  }
  {
    GraphBuilder b;
    const ValueId x = b.input("x", {2, 3, 4});
    b.output(b.node("Flatten", {x}, {6, 4}, attrs_of({{"axis", Attribute::of_int(2)}})));
    expect_matches_native(b.graph(), {random_tensor({2, 3, 4}, 13)});
  }
}

TEST(TestBackendOps, MultiNodeRegionKeepsIntermediatesOnTheDevice) {
  // x → MatMul(W) → Add(x2) → Transpose → Softmax, plus a second output read mid-way;
  // W is a constant the backend must copy to the device itself.
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 4});
  const ValueId x2 = b.input("x2", {5});
  const ValueId w = b.constant("w", random_tensor({4, 5}, 14));
  const ValueId product = b.node("MatMul", {x, w}, {2, 3, 5});
  const ValueId sum = b.node("Add", {product, x2}, {2, 3, 5});
  const ValueId moved = b.node("Transpose", {sum}, {2, 5, 3}, attrs_of({{"perm", Attribute::of_ints({0, 2, 1})}}));
  const ValueId soft = b.node("Softmax", {moved}, {2, 5, 3});
  b.output(soft);
  b.output(sum);
  expect_matches_native(b.graph(), {random_tensor({2, 3, 4}, 15), random_tensor({5}, 16)});
}

// --- patterns: composites built the way extract_region builds them ---

struct GeluGraph {
  Graph graph;
  std::vector<size_t> members;
};

/// x → [MatMul(W) → Add(bias) →] Gelu(erf form) → output. The Gelu's
/// commutative operands are swapped when `swapped`.
GeluGraph gelu_graph(bool with_matmul_bias, bool swapped, bool with_relu_instead = false) {
  GraphBuilder b;
  const Shape shape = {2, 3, 5};
  ValueId x = b.input("x", with_matmul_bias ? Shape{2, 3, 4} : shape);
  if (with_matmul_bias) {
    const ValueId w = b.constant("w", random_tensor({4, 5}, 20));
    const ValueId bias = b.constant("bias", random_tensor({5}, 21));
    const ValueId product = b.node("MatMul", {x, w}, shape);
    x = swapped ? b.node("Add", {bias, product}, shape) : b.node("Add", {product, bias}, shape);
  }
  if (with_relu_instead) {
    b.output(b.node("Relu", {x}, shape));
  } else {
    const ValueId sqrt2 = b.constant("sqrt2", float_tensor({}, {1.4142135f}));
    const ValueId one = b.constant("one", float_tensor({}, {1.0f}));
    const ValueId half = b.constant("half", float_tensor({}, {0.5f}));
    const ValueId divided = b.node("Div", {x, sqrt2}, shape);
    const ValueId erf = b.node("Erf", {divided}, shape);
    const ValueId plus_one = swapped ? b.node("Add", {one, erf}, shape) : b.node("Add", {erf, one}, shape);
    const ValueId times_x = swapped ? b.node("Mul", {plus_one, x}, shape) : b.node("Mul", {x, plus_one}, shape);
    b.output(swapped ? b.node("Mul", {half, times_x}, shape) : b.node("Mul", {times_x, half}, shape));
  }
  GeluGraph result{b.graph(), {}};
  for (size_t i = 0; i < result.graph.nodes.size(); ++i) result.members.push_back(i);
  return result;
}

TEST(TestBackendPatterns, GeluCompositeMatchesNativeInBothOperandOrders) {
  for (bool swapped : {false, true}) {
    for (bool reverse_inputs : {false, true}) {
      SCOPED_TRACE(std::string(swapped ? "swapped operands" : "PyTorch order") +
                   (reverse_inputs ? ", reversed composite inputs" : ""));
      GeluGraph plain = gelu_graph(false, swapped);
      Graph region = make_composite(plain.graph, plain.members, "Gelu", reverse_inputs);
      ASSERT_EQ(region.nodes.size(), 1u);
      expect_matches_native(region, {random_tensor({2, 3, 5}, 22, -3, 3)}, &plain.graph);
    }
  }
}

TEST(TestBackendPatterns, MatMulBiasCompositesMatchNative) {
  for (bool swapped : {false, true}) {
    for (bool reverse_inputs : {false, true}) {
      SCOPED_TRACE(std::string(swapped ? "swapped" : "plain") + (reverse_inputs ? ", reversed inputs" : ""));
      GeluGraph gelu = gelu_graph(true, swapped);
      expect_matches_native(make_composite(gelu.graph, gelu.members, "MatMulBiasGelu", reverse_inputs),
                            {random_tensor({2, 3, 4}, 23)}, &gelu.graph);
      GeluGraph relu = gelu_graph(true, swapped, /*with_relu_instead=*/true);
      expect_matches_native(make_composite(relu.graph, relu.members, "MatMulBiasRelu", reverse_inputs),
                            {random_tensor({2, 3, 4}, 24)}, &relu.graph);
      // MatMulBias alone, followed by a plain Relu outside the composite.
      expect_matches_native(make_composite(relu.graph, {0, 1}, "MatMulBias", reverse_inputs),
                            {random_tensor({2, 3, 4}, 25)}, &relu.graph);
    }
  }
}

TEST(TestBackendPatterns, AddReluCompositeBroadcastsLikeNative) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3, 4});
  const ValueId y = b.input("y", {3, 1});
  const ValueId sum = b.node("Add", {x, y}, {2, 3, 4});
  b.output(b.node("Relu", {sum}, {2, 3, 4}));
  for (bool reverse_inputs : {false, true}) {
    expect_matches_native(make_composite(b.graph(), {0, 1}, "AddRelu", reverse_inputs),
                          {random_tensor({2, 3, 4}, 26), random_tensor({3, 1}, 27)}, &b.graph());
  }
}

TEST(TestBackendPatterns, CompositeWhoseBodyDoesNotFitItsPatternIsAnInternalError) {
  // A "Gelu" composite around a MatMul+Add+Relu body.
  GeluGraph relu = gelu_graph(true, false, /*with_relu_instead=*/true);
  Graph region = make_composite(relu.graph, relu.members, "Gelu");
  std::unique_ptr<Backend> backend = make_test_backend();
  EXPECT_INTERNAL_ERROR(backend->compile(region, RegionOptions{}), "Gelu");
  // A "MatMulBias" composite whose body has an extra node.
  Graph extra = make_composite(relu.graph, relu.members, "MatMulBias");
  EXPECT_INTERNAL_ERROR(backend->compile(extra, RegionOptions{}), "MatMulBias");
}

}  // namespace
}  // namespace tessera::testing
