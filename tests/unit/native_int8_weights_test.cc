// Weight-only int8 products: the row kernel (every ISA build this CPU runs)
// against sums in double, with tails of K and of the column panels, bias,
// clamp and NaN; and MatMul(x, DequantizeLinear(int8 weights, scales)) kept
// 8-bit through constant folding and run as native's MatMulInt8Weights at
// several row counts of an open dim, against double; the cases that must
// fold to float32 instead (a non-zero zero point, a small matrix); Gemm with
// its weights stored either way, and the Gemms that must fold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backends/native/cpu_features.h"
#include "backends/native/kernels/nn_int8_weights.h"
#include "graph_builder.h"
#include "runtime/session.h"

namespace tessera::testing {
namespace {

using native::Int8Weights;

struct Problem {
  int64_t k, n;
  std::vector<int8_t> q;
  std::vector<float> scales, bias;
};

Problem make_problem(int64_t k, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p{k, n, std::vector<int8_t>(static_cast<size_t>(k * n)), std::vector<float>(static_cast<size_t>(n)),
            std::vector<float>(static_cast<size_t>(n))};
  for (int8_t& v : p.q) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  for (float& s : p.scales) s = 0.001f + static_cast<float>(rng() % 1000) * 1e-5f;
  for (float& b : p.bias) b = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) * 1e-3f;
  return p;
}

std::vector<float> uniform(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(count);
  for (float& e : v) e = dist(rng);
  return v;
}

/// clamp(scale[j] * sum_p x[r, p] * q[p, j] + bias[j], lo, hi) in double; NaN when any x of the row is.
double reference(const Problem& p, const std::vector<float>& x, int64_t r, int64_t j, bool with_bias, double lo, double hi) {
  double sum = 0;
  for (int64_t i = 0; i < p.k; ++i) sum += double(x[static_cast<size_t>(r * p.k + i)]) * p.q[static_cast<size_t>(i * p.n + j)];
  double v = sum * p.scales[static_cast<size_t>(j)] + (with_bias ? p.bias[static_cast<size_t>(j)] : 0.0);
  if (std::isnan(v)) return v;
  return std::min(std::max(v, lo), hi);
}

TEST(NativeInt8Weights, RowKernelMatchesDoubleOnEveryBuildThisCpuRuns) {
  std::vector<std::pair<std::string, native::Int8RowsFn>> builds = {{"portable", native::int8_weight_rows_portable}};
  if (native::cpu_features().avx2_fma) builds.push_back({"avx2", native::int8_weight_rows_avx2});
  const Problem p = make_problem(37, 45, 1);  // K: not a multiple of 4; N: two panels and 13 columns
  const Int8Weights w = native::pack_int8_weights(p.q.data(), p.k, p.n, p.scales.data(), p.n);
  for (const auto& [name, fn] : builds) {
    for (int64_t rows = 1; rows <= 9; ++rows) {
      for (const bool clamped : {false, true}) {
        SCOPED_TRACE(name + " rows " + std::to_string(rows) + (clamped ? " clamped" : ""));
        std::vector<float> x = uniform(static_cast<size_t>(rows * p.k), static_cast<uint32_t>(rows));
        if (rows == 3) x[static_cast<size_t>(1 * p.k + 5)] = NAN;  // row 1: NaN everywhere
        const float lo = clamped ? -0.05f : -INFINITY, hi = clamped ? 0.1f : INFINITY;
        std::vector<float> y(static_cast<size_t>(rows * p.n), -7.0f);
        fn(w, rows, x.data(), p.k, y.data(), p.n, clamped ? p.bias.data() : nullptr, lo, hi, 0,
           (p.n + native::kInt8WeightPanel - 1) / native::kInt8WeightPanel);
        int failures = 0;
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < p.n; ++j) {
            const double expected = reference(p, x, r, j, clamped, lo, hi);
            const double actual = y[static_cast<size_t>(r * p.n + j)];
            const bool ok = std::isnan(expected) ? std::isnan(actual) : std::fabs(actual - expected) <= 2e-6 * (1 + std::fabs(expected));
            if (!ok && failures++ < 5) ADD_FAILURE() << "y[" << r << ", " << j << "] = " << actual << ", expected " << expected;
          }
      }
    }
  }
}

/// x[-1 (open "rows"), 256] -> MatMul(DequantizeLinear(q[256, 257], scales[, zero point])) -> Add(bias) -> Relu.
struct Int8Model {
  Problem p;
  Graph graph;
  explicit Int8Model(bool per_column, const std::vector<int8_t>* zero_point = nullptr, Problem problem = make_problem(256, 257, 7))
      : p(std::move(problem)) {
    if (!per_column) std::fill(p.scales.begin(), p.scales.end(), p.scales[0]);
    GraphBuilder b;
    const ValueId x = b.input("x", {-1, p.k});
    b.graph.value(x).type.symbols = {"rows", ""};
    Tensor q(DType::kInt8, {p.k, p.n});
    std::copy(p.q.begin(), p.q.end(), q.as<int8_t>());
    Tensor scales(DType::kFloat32, per_column ? Shape{p.n} : Shape{});
    std::copy(p.scales.begin(), p.scales.begin() + scales.numel(), scales.as<float>());
    std::vector<ValueId> dq_inputs = {b.constant(q), b.constant(scales)};
    if (zero_point) {
      Tensor z(DType::kInt8, {static_cast<int64_t>(zero_point->size())});
      std::copy(zero_point->begin(), zero_point->end(), z.as<int8_t>());
      dq_inputs.push_back(b.constant(z));
    }
    const ValueId weights = b.node("DequantizeLinear", dq_inputs, attributes({{"axis", Attribute::of_int(1)}}));
    Tensor bias(DType::kFloat32, {p.n});
    std::copy(p.bias.begin(), p.bias.end(), bias.as<float>());
    b.output(b.node("Relu", {b.node("Add", {b.node("MatMul", {x, weights}), b.constant(bias)})}));
    graph = b.graph;
  }
};

std::string placement_of(const CompiledModel& model, const std::string& op_type) {
  for (const NodePlacement& p : model.placement()) {
    if (p.op_type == op_type) return p.backend + ": " + p.why + " " + p.note;
  }
  return "(absent)";
}

void expect_model_matches(const Int8Model& m, const CompiledModel& model) {
  for (int64_t rows : {1, 5, 12}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    const std::vector<float> x = uniform(static_cast<size_t>(rows * m.p.k), static_cast<uint32_t>(100 + rows));
    Tensor input(DType::kFloat32, {rows, m.p.k});
    std::copy(x.begin(), x.end(), input.as<float>());
    const std::vector<Tensor> out = model.run({input.view()});
    ASSERT_EQ(out[0].shape(), (Shape{rows, m.p.n}));
    int failures = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < m.p.n; ++j) {
        const double expected = reference(m.p, x, r, j, true, 0, INFINITY);
        const double actual = out[0].as<float>()[r * m.p.n + j];
        if (!(std::fabs(actual - expected) <= 1e-5 * (1 + std::fabs(expected))) && failures++ < 5) {
          ADD_FAILURE() << "y[" << r << ", " << j << "] = " << actual << ", expected " << expected;
        }
      }
  }
}

TEST(NativeInt8Weights, DequantizedWeightsStayInt8AndRunAsOneProduct) {
  const std::vector<int8_t> zeros(257, 0);
  for (const int variant : {0, 1, 2}) {  // scale per column; one scale; per column with zero points of 0
    SCOPED_TRACE("variant " + std::to_string(variant));
    const Int8Model m(variant != 1, variant == 2 ? &zeros : nullptr);
    CompileOptions options;
    options.backends = {"dnnl", "native"};
    std::unique_ptr<CompiledModel> model = CompiledModel::compile(m.graph, options);
    for (const char* op : {"DequantizeLinear", "MatMul", "Add", "Relu"}) {
      const std::string where = placement_of(*model, op);
      EXPECT_NE(where.find("MatMulInt8Weights"), std::string::npos) << op << ": " << where;
    }
    expect_model_matches(m, *model);
  }
}

TEST(NativeInt8Weights, GemmReadsTheInt8WeightsStoredEitherWay) {
  // Gemm(x, DequantizeLinear(q), C) + Relu with transB = 1 (q stored [N, K], a scale per row) and
  // Gemm(x, DequantizeLinear(q)) with transB = 0 (q [K, N], a scale per column): one product each.
  // A scale per input channel (transB = 1, scales per column) or alpha 2 fold to float32 instead.
  const Problem p = make_problem(256, 257, 11);
  struct Case {
    bool trans_b;
    bool bias;
    int64_t scale_axis;  // of q as stored
    float alpha;
    bool fused;
  };
  const std::vector<Case> cases = {{true, true, 0, 1.0f, true}, {false, false, 1, 1.0f, true},
                                   {true, true, 1, 1.0f, false}, {false, true, 1, 2.0f, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string("transB ") + (c.trans_b ? "1" : "0") + " axis " + std::to_string(c.scale_axis) + " alpha " +
                 std::to_string(c.alpha));
    GraphBuilder b;
    const ValueId x = b.input("x", {-1, p.k});
    b.graph.value(x).type.symbols = {"rows", ""};
    // Stored q: [K, N], or [N, K] for transB (the same values q[p][j] either way).
    Tensor q(DType::kInt8, c.trans_b ? Shape{p.n, p.k} : Shape{p.k, p.n});
    for (int64_t i = 0; i < p.k; ++i)
      for (int64_t j = 0; j < p.n; ++j) q.as<int8_t>()[c.trans_b ? j * p.k + i : i * p.n + j] = p.q[static_cast<size_t>(i * p.n + j)];
    const int64_t scale_count = q.shape()[static_cast<size_t>(c.scale_axis)];
    Tensor scales(DType::kFloat32, {scale_count});
    for (int64_t i = 0; i < scale_count; ++i) {
      const bool per_output = scale_count == p.n;
      scales.as<float>()[i] = per_output ? p.scales[static_cast<size_t>(i)] : 0.001f + static_cast<float>(i) * 1e-5f;
    }
    const bool per_input = scale_count == p.k && (c.trans_b ? c.scale_axis == 1 : c.scale_axis == 0);
    const ValueId weights = b.node("DequantizeLinear", {b.constant(q), b.constant(scales)},
                                   attributes({{"axis", Attribute::of_int(c.scale_axis)}}));
    Tensor bias(DType::kFloat32, {p.n});
    std::copy(p.bias.begin(), p.bias.end(), bias.as<float>());
    std::vector<ValueId> inputs = {x, weights};
    if (c.bias) inputs.push_back(b.constant(bias));
    const ValueId y = b.node("Gemm", inputs, attributes({{"transB", Attribute::of_int(c.trans_b ? 1 : 0)},
                                                         {"alpha", Attribute::of_float(c.alpha)}}));
    b.output(c.bias ? b.node("Relu", {y}) : y);
    CompileOptions options;
    options.backends = {"dnnl", "native"};
    std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
    const std::string where = placement_of(*model, "DequantizeLinear");
    EXPECT_NE(where.find(c.fused ? "MatMulInt8Weights" : "folded"), std::string::npos) << where;
    for (int64_t rows : {1, 6}) {
      const std::vector<float> xv = uniform(static_cast<size_t>(rows * p.k), static_cast<uint32_t>(rows));
      Tensor input(DType::kFloat32, {rows, p.k});
      std::copy(xv.begin(), xv.end(), input.as<float>());
      const std::vector<Tensor> out = model->run({input.view()});
      ASSERT_EQ(out[0].shape(), (Shape{rows, p.n}));
      int failures = 0;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < p.n; ++j) {
          double sum = 0;
          for (int64_t i = 0; i < p.k; ++i) {
            const double w = double(p.q[static_cast<size_t>(i * p.n + j)]) *
                             (per_input ? scales.as<float>()[i] : (scale_count == 1 ? scales.as<float>()[0] : p.scales[static_cast<size_t>(j)]));
            sum += double(xv[static_cast<size_t>(r * p.k + i)]) * w;
          }
          double expected = c.alpha * sum + (c.bias ? p.bias[static_cast<size_t>(j)] : 0.0);
          if (c.bias) expected = std::max(expected, 0.0);
          const double actual = out[0].as<float>()[r * p.n + j];
          if (!(std::fabs(actual - expected) <= 1e-5 * (1 + std::fabs(expected))) && failures++ < 5) {
            ADD_FAILURE() << "y[" << r << ", " << j << "] = " << actual << ", expected " << expected;
          }
        }
    }
  }
}

TEST(NativeInt8Weights, OtherDequantizationsFoldToFloat32) {
  // A zero point that is not 0: DequantizeLinear folds at compile time, and the product still matches.
  std::vector<int8_t> shifted(257, 0);
  shifted[3] = 2;
  Problem problem = make_problem(256, 257, 7);
  for (int64_t i = 0; i < problem.k; ++i) {
    int8_t& v = problem.q[static_cast<size_t>(i * problem.n + 3)];
    v = std::max<int8_t>(v, -125);
  }
  Int8Model m(true, &shifted, problem);
  CompileOptions options;
  options.backends = {"native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(m.graph, options);
  EXPECT_NE(placement_of(*model, "DequantizeLinear").find("folded"), std::string::npos) << placement_of(*model, "DequantizeLinear");
  for (int64_t i = 0; i < m.p.k; ++i) m.p.q[static_cast<size_t>(i * m.p.n + 3)] -= 2;  // what the reference multiplies
  expect_model_matches(m, *model);
}

}  // namespace
}  // namespace tessera::testing
