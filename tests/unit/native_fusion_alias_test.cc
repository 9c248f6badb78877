// The native backend's MatMulBias composite (MatMul by constant weights, Add of
// a constant bias over the last axis, optionally Relu or Clip: one GEMM that
// starts from the bias and clamps as it stores) against products computed in
// double, where it must apply and where it must not; and values of run-time
// shapes that view their input's bytes (Reshape and kin, ValueStore::alias)
// instead of copies, with the cases the store must refuse: graph outputs, and
// inputs in the memory plan's arena, whose slots later values reuse; and
// MatMul of a Transpose of the last two axes (MatMulTransposedB) read in place; and run-time buffers
// released after their last reader (RunStore::release), never while a view of them is live.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "graph_builder.h"
#include "runtime/session.h"

namespace tessera::testing {
namespace {

/// NaN-propagating: a NaN fails.
void expect_close(const Tensor& actual, const std::vector<double>& expected, double tolerance) {
  ASSERT_EQ(static_cast<size_t>(actual.numel()), expected.size());
  int failures = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = actual.as<float>()[i];
    if (!(std::fabs(a - expected[i]) <= tolerance * (1 + std::fabs(expected[i]))) && failures++ < 5) {
      ADD_FAILURE() << "element " << i << ": " << a << ", expected " << expected[i];
    }
  }
}

/// x[rows, k] * w[k, n] + bias (over the last axis), clamped to [low, high], in double.
std::vector<double> affine_reference(const Tensor& x, const Tensor& w, const Tensor& bias, double low, double high) {
  const int64_t k = w.shape()[0], n = w.shape()[1], rows = x.numel() / k;
  std::vector<double> y(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double sum = bias.as<float>()[j];
      for (int64_t p = 0; p < k; ++p) sum += double(x.as<float>()[r * k + p]) * w.as<float>()[p * n + j];
      y[static_cast<size_t>(r * n + j)] = std::min(std::max(sum, low), high);
    }
  return y;
}

std::string placement_of(const CompiledModel& model, const std::string& op_type) {
  for (const NodePlacement& p : model.placement()) {
    if (p.op_type == op_type) return p.backend + ": " + p.why + " " + p.note;
  }
  return "";
}

TEST(NativeMatMulBias, BiasAndActivationFuseIntoTheGemmAtEveryShape) {
  const Tensor w = random_uniform({16, 24}, 1, -0.5f, 0.5f), bias = random_uniform({24}, 2, -1, 1);
  struct Case {
    std::string activation;  // "", "Relu" or "Clip"
    bool bias_first;         // Add(bias, product)
    Shape bias_shape;
    double low, high;
  };
  const double inf = INFINITY;
  const std::vector<Case> cases = {{"Relu", false, {24}, 0, inf},
                                   {"", true, {1, 24}, -inf, inf},
                                   {"Clip", false, {1, 1, 24}, -0.25, 0.5}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.activation + (c.bias_first ? " bias first" : ""));
    GraphBuilder b;
    const ValueId x = b.input("x", {2, -1, 16});
    b.graph.value(x).type.symbols = {"", "seq", ""};
    Tensor shaped_bias(DType::kFloat32, c.bias_shape);
    std::copy(bias.as<float>(), bias.as<float>() + 24, shaped_bias.as<float>());
    const ValueId product = b.node("MatMul", {x, b.constant(w)});
    const ValueId bias_value = b.constant(shaped_bias);
    ValueId y = c.bias_first ? b.node("Add", {bias_value, product}) : b.node("Add", {product, bias_value});
    if (c.activation == "Relu") y = b.node("Relu", {y});
    if (c.activation == "Clip") y = b.node("Clip", {y, b.scalar(-0.25f), b.scalar(0.5f)});
    b.output(y);
    CompileOptions options;
    options.backends = {"native"};
    std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
    EXPECT_NE(placement_of(*model, "Add").find("MatMulBias"), std::string::npos) << placement_of(*model, "Add");
    for (int64_t seq : {1, 7, 33}) {
      const Tensor input = random_uniform({2, seq, 16}, static_cast<uint32_t>(10 + seq), -1, 1);
      const std::vector<Tensor> out = model->run({input.view()});
      ASSERT_EQ(out[0].shape(), (Shape{2, seq, 24}));
      expect_close(out[0], affine_reference(input, w, bias, c.low, c.high), 1e-5);
    }
  }
}

TEST(NativeMatMulBias, AddsThatAreNoBiasStayAdds) {
  // A bias over the rows (a [rows, N] constant), and a product by a run-time matrix.
  const Tensor w = random_uniform({8, 6}, 3, -1, 1), rows_bias = random_uniform({5, 6}, 4, -1, 1);
  GraphBuilder b;
  const ValueId x = b.input("x", {5, 8});
  const ValueId m = b.input("m", {8, 6});
  b.output(b.node("Relu", {b.node("Add", {b.node("MatMul", {x, b.constant(w)}), b.constant(rows_bias)})}));
  b.output(b.node("Add", {b.node("MatMul", {x, m}), b.constant(random_uniform({6}, 5, -1, 1))}));
  CompileOptions options;
  options.backends = {"native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
  for (const NodePlacement& p : model->placement()) {
    EXPECT_EQ(p.why.find("MatMulBias"), std::string::npos) << p.node_name << ": " << p.why;
  }
  const Tensor input = random_uniform({5, 8}, 6, -1, 1), matrix = random_uniform({8, 6}, 7, -1, 1);
  const std::vector<Tensor> out = model->run({input.view(), matrix.view()});
  std::vector<double> expected(30);
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t j = 0; j < 6; ++j) {
      double sum = rows_bias.as<float>()[r * 6 + j];
      for (int64_t p = 0; p < 8; ++p) sum += double(input.as<float>()[r * 8 + p]) * w.as<float>()[p * 6 + j];
      expected[static_cast<size_t>(r * 6 + j)] = std::max(sum, 0.0);
    }
  expect_close(out[0], expected, 1e-5);
}

TEST(NativeMatMulTransposedB, ProductsWithATransposedOperandReadItInPlace) {
  // Attention's Q x K^T: a[2, 3, m, 8] x Transpose(b[2, 3, 7, 8], perm 0 1 3 2), m open (1 and 3 take the
  // dot-product path, 9 the GEMM reading B with strides); and a 2-D Transpose without perm.
  GraphBuilder g;
  const ValueId a = g.input("a", {2, 3, -1, 8});
  g.graph.value(a).type.symbols = {"", "", "m", ""};
  const ValueId b = g.input("b", {2, 3, 7, 8});
  g.output(g.node("MatMul", {a, g.node("Transpose", {b}, attributes({{"perm", Attribute::of_ints({0, 1, 3, 2})}}))}));
  const ValueId c = g.input("c", {5, 8});
  g.output(g.node("MatMul", {a, g.node("Transpose", {c}, attributes({{"perm", Attribute::of_ints({1, 0})}}))}));
  CompileOptions options;
  options.backends = {"native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(g.graph, options);
  int fused = 0;
  for (const NodePlacement& p : model->placement()) fused += p.why.find("MatMulTransposedB") != std::string::npos;
  EXPECT_EQ(fused, 4);
  const Tensor bt = random_uniform({2, 3, 7, 8}, 31, -1, 1), ct = random_uniform({5, 8}, 32, -1, 1);
  for (int64_t m : {1, 3, 9}) {
    SCOPED_TRACE("m " + std::to_string(m));
    const Tensor at = random_uniform({2, 3, m, 8}, static_cast<uint32_t>(40 + m), -1, 1);
    const std::vector<Tensor> out = model->run({at.view(), bt.view(), ct.view()});
    ASSERT_EQ(out[0].shape(), (Shape{2, 3, m, 7}));
    ASSERT_EQ(out[1].shape(), (Shape{2, 3, m, 5}));
    std::vector<double> first, second;
    for (int64_t h = 0; h < 6; ++h)
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = 0; j < 7; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < 8; ++p) sum += double(at.as<float>()[(h * m + i) * 8 + p]) * bt.as<float>()[(h * 7 + j) * 8 + p];
          first.push_back(sum);
        }
        for (int64_t j = 0; j < 5; ++j) {
          double sum = 0;
          for (int64_t p = 0; p < 8; ++p) sum += double(at.as<float>()[(h * m + i) * 8 + p]) * ct.as<float>()[j * 8 + p];
          second.push_back(sum);
        }
      }
    expect_close(out[0], first, 1e-6);
    expect_close(out[1], second, 1e-6);
  }
}

TEST(NativeAlias, ReshapesOfRunTimeShapesViewTheirInputWithoutCopies) {
  // x[n, 6] -> Relu -> r; a = Reshape(r, [-1, 2, 3]); c = Reshape(a, [-1, 6]) (a view of a view);
  // y = c + r (reads both after the views); z = Reshape(r, [-1, 3, 2]) is a graph output (its own memory).
  GraphBuilder b;
  const ValueId x = b.input("x", {-1, 6});
  b.graph.value(x).type.symbols = {"n", ""};
  const ValueId r = b.node("Relu", {x});
  const ValueId a = b.node("Reshape", {r, b.ints({-1, 2, 3})});
  const ValueId c = b.node("Reshape", {a, b.ints({-1, 6})});
  b.output(b.node("Add", {c, r}));
  b.output(b.node("Reshape", {r, b.ints({-1, 3, 2})}));
  CompileOptions options;
  options.backends = {"native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
  for (int64_t n : {9, 3, 1}) {
    const Tensor input = random_uniform({n, 6}, static_cast<uint32_t>(n), -1, 1);
    RunProfile profile;
    const std::vector<Tensor> out = model->run({input.view()}, {}, &profile);
    ASSERT_EQ(out[1].shape(), (Shape{n, 3, 2}));
    std::vector<double> sum(static_cast<size_t>(n * 6)), relu(static_cast<size_t>(n * 6));
    for (int64_t i = 0; i < n * 6; ++i) {
      relu[static_cast<size_t>(i)] = std::max(double(input.as<float>()[i]), 0.0);
      sum[static_cast<size_t>(i)] = 2 * relu[static_cast<size_t>(i)];
    }
    expect_close(out[0], sum, 0);
    expect_close(out[1], relu, 0);
    // Working memory: r alone (a and c view it); the largest shape comes first, later ones reuse it.
    EXPECT_EQ(profile.counts.allocations, n == 9 ? 1 : 0) << "n = " << n;
  }
}

TEST(NativeAlias, AnInputInTheArenaIsCopiedNotViewed) {
  // r = Relu(x) has a static shape: its memory is an arena slot, free after its last
  // reader, the Reshape into a shape read from an input at run time (so not
  // planned). t = Neg(x) comes after, of r's size, and may take that slot; a view
  // of r would then read t's values.
  GraphBuilder b;
  const ValueId x = b.input("x", {4, 6});
  const ValueId dims = b.graph.add_value("dims", TensorType::make(DType::kInt64, {2}));
  b.graph.inputs.push_back(dims);
  const ValueId r = b.node("Relu", {x});
  const ValueId a = b.node("Reshape", {r, dims});
  const ValueId t = b.node("Neg", {x});
  const ValueId u = b.node("Relu", {t});
  b.output(b.node("Add", {b.node("Reshape", {a, b.ints({4, 6})}), u}));
  CompileOptions options;
  options.backends = {"native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
  const Tensor input = random_uniform({4, 6}, 21, -1, 1);
  Tensor shape(DType::kInt64, {2});
  shape.as<int64_t>()[0] = 8;
  shape.as<int64_t>()[1] = 3;
  const std::vector<Tensor> out = model->run({input.view(), shape.view()});
  std::vector<double> expected(24);
  for (int64_t i = 0; i < 24; ++i) expected[static_cast<size_t>(i)] = std::fabs(double(input.as<float>()[i]));
  expect_close(out[0], expected, 0);
}

TEST(RunMemory, ValuesOfRunTimeShapesGiveTheirBuffersToLaterOnesAfterTheirLastReader) {
  // A chain of eight element-wise steps on x[n, 64]: each value dies at the next step, so two buffers serve
  // the chain (a run held eight before values were released at their last reader).
  GraphBuilder b;
  const ValueId x = b.input("x", {-1, 64});
  b.graph.value(x).type.symbols = {"n", ""};
  ValueId v = b.node("Neg", {x});
  for (int i = 0; i < 7; ++i) v = b.node(i % 2 ? "Neg" : "Relu", {v});
  b.output(v);
  CompileOptions options;
  options.backends = {"native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
  const Tensor input = random_uniform({50, 64}, 31, -1, 1);
  RunProfile profile;
  const std::vector<Tensor> out = model->run({input.view()}, {}, &profile);
  std::vector<double> expected(50 * 64);
  // Neg, then Relu and Neg alternating, step by step.
  for (size_t i = 0; i < expected.size(); ++i) {
    double value = -double(input.as<float>()[i]);
    for (int k = 0; k < 7; ++k) value = k % 2 ? -value : std::max(value, 0.0);
    expected[i] = value;
  }
  expect_close(out[0], expected, 0);
  EXPECT_LE(profile.counts.allocations, 2);
}

TEST(RunMemory, ABufferStaysWhileAViewOfItIsLive) {
  // a = Neg(x); v = Reshape(a) views a's buffer; a's last reader is the Reshape, but v is read after
  // d = Relu(x) is allocated, which must not take a's buffer: y = v + d = -x + relu(x).
  GraphBuilder b;
  const ValueId x = b.input("x", {-1, 8});
  b.graph.value(x).type.symbols = {"n", ""};
  const ValueId a = b.node("Neg", {x});
  const ValueId view = b.node("Reshape", {a, b.ints({-1, 4, 2})});
  const ValueId d = b.node("Relu", {b.node("Reshape", {x, b.ints({-1, 4, 2})})});
  b.output(b.node("Add", {view, d}));
  CompileOptions options;
  options.backends = {"native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
  for (int64_t n : {6, 6, 2}) {
    const Tensor input = random_uniform({n, 8}, static_cast<uint32_t>(40 + n), -1, 1);
    const std::vector<Tensor> out = model->run({input.view()});
    std::vector<double> expected(static_cast<size_t>(n * 8));
    for (size_t i = 0; i < expected.size(); ++i) {
      const double value = input.as<float>()[i];
      expected[i] = -value + std::max(value, 0.0);
    }
    expect_close(out[0], expected, 0);
  }
}

}  // namespace
}  // namespace tessera::testing
