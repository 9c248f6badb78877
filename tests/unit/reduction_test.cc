// Unit tests of the reduction family's kernels (Reduce*, ArgMax/ArgMin, TopK,
// Softmax/LogSoftmax/Hardmax) against plain reference loops written here.
#include <cmath>
#include <functional>
#include <limits>

#include "ir/error.h"
#include "test_util.h"

namespace tessera::native {
// The ISA builds of the float32 softmax microkernels (reduction_softmax_{avx2,avx512}.cc).
void softmax_rows_avx2(const float* x, float* y, int64_t rows, int64_t n);
void log_softmax_rows_avx2(const float* x, float* y, int64_t rows, int64_t n);
void normalize_column_block_avx2(const float* in, float* out, int64_t extent, int64_t inner, int64_t width, bool log);
void softmax_rows_avx512(const float* x, float* y, int64_t rows, int64_t n);
void log_softmax_rows_avx512(const float* x, float* y, int64_t rows, int64_t n);
void normalize_column_block_avx512(const float* in, float* out, int64_t extent, int64_t inner, int64_t width, bool log);
}  // namespace tessera::native

namespace tessera::testing {
namespace {

/// Plain reference: reduces x over the axes in mask with `combine` from `init`,
/// then applies finish(accumulated, count). Output keeps dims (size 1).
Tensor reference_reduce(const Tensor& x, const std::vector<bool>& mask, double init,
                        const std::function<double(double, double)>& combine,
                        const std::function<double(double, int64_t)>& finish) {
  Shape out_shape = x.shape();
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) out_shape[i] = 1;
  }
  Tensor y(DType::kFloat32, out_shape);
  std::vector<double> acc(static_cast<size_t>(y.numel()), init);
  std::vector<int64_t> index(x.shape().size(), 0);
  int64_t count = 1;
  for (size_t i = 0; i < mask.size(); ++i) count *= mask[i] ? x.shape()[i] : 1;
  for (int64_t flat = 0; flat < x.numel(); ++flat) {
    int64_t rem = flat, out_flat = 0, out_stride = 1;
    for (size_t d = x.shape().size(); d-- > 0;) {
      index[d] = rem % x.shape()[d];
      rem /= x.shape()[d];
    }
    for (size_t d = x.shape().size(); d-- > 0;) {
      out_flat += (mask[d] ? 0 : index[d]) * out_stride;
      out_stride *= out_shape[d];
    }
    acc[static_cast<size_t>(out_flat)] = combine(acc[static_cast<size_t>(out_flat)], x.as<float>()[flat]);
  }
  for (int64_t i = 0; i < y.numel(); ++i) y.as<float>()[i] = static_cast<float>(finish(acc[static_cast<size_t>(i)], count));
  return y;
}

OneOpGraph reduce_graph(const std::string& op, const Tensor& x, std::vector<int64_t> axes, int opset) {
  OneOpGraph g;
  g.op_type = op;
  g.opset = opset;
  g.inputs = {x};
  g.attrs.set("keepdims", Attribute::of_int(1));
  if (op == "ReduceSum" && opset >= 13) {
    g.constants = {{1, make_int64({static_cast<int64_t>(axes.size())}, axes)}};
  } else {
    g.attrs.set("axes", Attribute::of_ints(axes));
  }
  return g;
}

struct ReduceCase {
  std::string op;
  double init;
  std::function<double(double, double)> combine;
  std::function<double(double, int64_t)> finish;
};

std::vector<ReduceCase> reduce_cases() {
  auto sum = [](double a, double x) { return a + x; };
  auto same = [](double a, int64_t) { return a; };
  return {
      {"ReduceSum", 0, sum, same},
      {"ReduceMean", 0, sum, [](double a, int64_t n) { return a / static_cast<double>(n); }},
      {"ReduceMax", -1e30, [](double a, double x) { return std::max(a, x); }, same},
      {"ReduceMin", 1e30, [](double a, double x) { return std::min(a, x); }, same},
      {"ReduceProd", 1, [](double a, double x) { return a * (1.0 + x); }, same},
      {"ReduceL1", 0, [](double a, double x) { return a + std::fabs(x); }, same},
      {"ReduceL2", 0, [](double a, double x) { return a + x * x; }, [](double a, int64_t) { return std::sqrt(a); }},
      {"ReduceSumSquare", 0, [](double a, double x) { return a + x * x; }, same},
      {"ReduceLogSumExp", 0, [](double a, double x) { return a + std::exp(x); },
       [](double a, int64_t) { return std::log(a); }},
  };
}

TEST(Reduction, AllOpsMatchReferenceOverAxisSets) {
  const Shape shape = {3, 5, 4, 37};
  const std::vector<std::vector<int64_t>> axis_sets = {{3}, {1}, {0}, {1, 2}, {0, 2}, {1, 3}, {-1, 0}};
  for (const ReduceCase& c : reduce_cases()) {
    for (const auto& axes : axis_sets) {
      for (int opset : {11, 13}) {
        Tensor x = random_float(shape, 7);
        // ReduceProd: keep factors near 1 so products stay in range; the reference adds 1 too.
        if (c.op == "ReduceProd") {
          for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] += 1.0f;
        }
        std::vector<bool> mask(shape.size(), false);
        for (int64_t a : axes) mask[static_cast<size_t>(a < 0 ? a + 4 : a)] = true;
        auto reference_combine = c.combine;
        if (c.op == "ReduceProd") reference_combine = [](double a, double v) { return a * v; };
        Tensor expected = reference_reduce(x, mask, c.init, reference_combine, c.finish);
        for (int threads : {1, 3}) {
          SCOPED_TRACE(c.op + " opset " + std::to_string(opset) + " threads " + std::to_string(threads));
          auto out = run_one_op(reduce_graph(c.op, x, axes, opset), threads);
          expect_close(out[0], expected, 1e-4, 1e-4);
        }
      }
    }
  }
}

TEST(Reduction, DefaultAxesReduceAllAndKeepdimsZeroDropsDims) {
  Tensor x = random_float({2, 3, 4}, 3);
  OneOpGraph g;
  g.op_type = "ReduceMean";
  g.opset = 13;
  g.inputs = {x};
  g.attrs.set("keepdims", Attribute::of_int(0));
  auto out = run_one_op(g);
  double sum = 0;
  for (int64_t i = 0; i < x.numel(); ++i) sum += x.as<float>()[i];
  ASSERT_EQ(out[0].shape(), Shape{});
  EXPECT_NEAR(out[0].as<float>()[0], sum / 24.0, 1e-5);
}

TEST(Reduction, EmptyAxesWithNoopIsIdentity) {
  Tensor x = random_float({2, 3}, 5);
  OneOpGraph g;
  g.op_type = "ReduceSum";
  g.inputs = {x, make_int64({0}, {})};
  g.attrs.set("noop_with_empty_axes", Attribute::of_int(1));
  auto out = run_one_op(g);
  expect_close(out[0], x);
}

TEST(Reduction, IntegerSumAndMax) {
  Tensor x(DType::kInt32, {2, 3});
  for (int i = 0; i < 6; ++i) x.as<int32_t>()[i] = i * 7 - 10;
  OneOpGraph g;
  g.op_type = "ReduceMax";
  g.inputs = {x};
  g.attrs.set("axes", Attribute::of_ints({1}));
  g.attrs.set("keepdims", Attribute::of_int(0));
  auto out = run_one_op(g);
  ASSERT_EQ(out[0].dtype(), DType::kInt32);
  EXPECT_EQ(out[0].as<int32_t>()[0], 4);
  EXPECT_EQ(out[0].as<int32_t>()[1], 25);
}

TEST(Reduction, OutOfRangeAxisIsUserError) {
  OneOpGraph g = reduce_graph("ReduceSum", random_float({2, 3}, 1), {5}, 13);
  EXPECT_USER_ERROR(run_one_op(g), "ReduceSum_0");
}

/// Reference softmax of every [outer, extent, inner] column; log selects LogSoftmax.
Tensor reference_softmax(const Tensor& x, int64_t outer, int64_t extent, int64_t inner, bool log) {
  Tensor y(DType::kFloat32, x.shape());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t r) { return (o * extent + r) * inner + j; };
      double m = -1e300, s = 0;
      for (int64_t r = 0; r < extent; ++r) m = std::max(m, double(x.as<float>()[at(r)]));
      for (int64_t r = 0; r < extent; ++r) s += std::exp(double(x.as<float>()[at(r)]) - m);
      for (int64_t r = 0; r < extent; ++r) {
        double v = double(x.as<float>()[at(r)]) - m;
        y.as<float>()[at(r)] = static_cast<float>(log ? v - std::log(s) : std::exp(v) / s);
      }
    }
  }
  return y;
}

TEST(Softmax, PerAxisFromOpset13AndCoercedBefore) {
  Tensor x = random_float({4, 6, 35}, 11);
  // A wide range exercises the exp; outputs near 30 in size keep ~2e-6 absolute float error.
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] *= 30.0f;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    const bool log = std::string(op) == "LogSoftmax";
    for (int threads : {1, 2}) {
      SCOPED_TRACE(op);
      OneOpGraph g;
      g.op_type = op;
      g.inputs = {x};
      // Opset 13, default axis -1: rows of 35.
      expect_close(run_one_op(g, threads)[0], reference_softmax(x, 24, 35, 1, log), 1e-5, 1e-5);
      // Opset 13, axis 1: columns.
      g.attrs.set("axis", Attribute::of_int(1));
      expect_close(run_one_op(g, threads)[0], reference_softmax(x, 4, 6, 35, log), 1e-5, 1e-5);
      // Opset 11, axis 1: coerced to [4, 210].
      g.opset = 11;
      expect_close(run_one_op(g, threads)[0], reference_softmax(x, 4, 210, 1, log), 1e-5, 1e-5);
      // Opset 11, default axis (1) as well.
      g.attrs.erase("axis");
      expect_close(run_one_op(g, threads)[0], reference_softmax(x, 4, 210, 1, log), 1e-5, 1e-5);
    }
  }
}

TEST(Softmax, EveryIsaMicrokernelMatchesReference) {
  // The session picks one ISA; call each build this CPU can run directly. Rows of 67 (two 32-wide steps
  // and a tail), 50 (a 16-wide step too), 16, 7 (a tail only) and 1100 (LogSoftmax's 512-element blocks).
  struct Isa {
    const char* name;
    bool supported;
    void (*rows)(const float*, float*, int64_t, int64_t);
    void (*log_rows)(const float*, float*, int64_t, int64_t);
    void (*columns)(const float*, float*, int64_t, int64_t, int64_t, bool);
  };
  const Isa isas[] = {
      {"avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), native::softmax_rows_avx2,
       native::log_softmax_rows_avx2, native::normalize_column_block_avx2},
      {"avx512", static_cast<bool>(__builtin_cpu_supports("avx512f")), native::softmax_rows_avx512,
       native::log_softmax_rows_avx512, native::normalize_column_block_avx512},
  };
  for (int64_t n : {67, 50, 16, 7, 1100}) {
    const int64_t rows = n > 256 ? 2 : 5;
    Tensor x = random_float({rows, n}, static_cast<uint32_t>(13 + n));
    for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] *= 20.0f;
    x.as<float>()[n - 1] = 60.0f;  // the first row's maximum in its tail
    for (const Isa& isa : isas) {
      if (!isa.supported) continue;
      SCOPED_TRACE(std::string(isa.name) + ", rows of " + std::to_string(n));
      for (bool log : {false, true}) {
        Tensor y(DType::kFloat32, x.shape());
        (log ? isa.log_rows : isa.rows)(x.as<float>(), y.as<float>(), rows, n);
        expect_close(y, reference_softmax(x, rows, n, 1, log), 1e-5, 1e-5);
        if (n > 256) continue;  // (the column kernel takes at most 256 columns)
        isa.columns(x.as<float>(), y.as<float>(), rows, n, n, log);  // softmax down the rows
        expect_close(y, reference_softmax(x, 1, rows, n, log), 1e-5, 1e-5);
      }
    }
  }
}

/// LogSoftmax of every row of a [rows, n] tensor (float32 or float64) in long double,
/// from the definition: (x - max) - log(sum(exp(x - max))). Written as (x - max) - log(sum)
/// because long double's max + log(sum) would also round to its ulp (2^36 for max ~ 1e30).
Tensor reference_log_softmax_long_double(const Tensor& x) {
  const int64_t rows = x.shape()[0], n = x.shape()[1];
  Tensor y(x.dtype(), x.shape());
  for (int64_t r = 0; r < rows; ++r) {
    long double m = -std::numeric_limits<long double>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, static_cast<long double>(x.double_at(r * n + i)));
    long double s = 0;
    for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<long double>(x.double_at(r * n + i)) - m);
    for (int64_t i = 0; i < n; ++i) {
      const long double v = (static_cast<long double>(x.double_at(r * n + i)) - m) - std::log(s);
      if (x.dtype() == DType::kFloat32) {
        y.as<float>()[r * n + i] = static_cast<float>(v);
      } else {
        y.as<double>()[r * n + i] = static_cast<double>(v);
      }
    }
  }
  return y;
}

/// Rows of 67 (four 16-lane blocks and a tail) with large values: around 1e4 (ONNX's
/// test_logsoftmax_large_number), around -1e4, and around 1e30 with ties at the maximum, where
/// max + log(sum) rounds to max and x - (max + log(sum)) gives 0 instead of -log(ties).
Tensor large_log_softmax_rows(DType dtype) {
  const int64_t rows = 8, n = 67;
  const Tensor noise = random_float({rows, n}, 17);
  Tensor x(dtype, {rows, n});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const double u = noise.as<float>()[r * n + i];
      double v = 0;
      switch (r) {
        case 0: v = i < 4 ? 10000 + i : 10000 - 3 * (i - 4); break;  // ONNX's row, then further below
        case 1: v = 1e4 + 8 * u; break;
        case 2: v = 1.2345e4 + 20 * u; break;
        case 3: v = -1e4 + 8 * u; break;
        case 4: v = i % 3 == 0 ? 1e30 : 1e30 * (0.5 + 0.4 * u); break;  // 23 ties at 1e30
        case 5: v = i % 5 == 0 ? 1e30 : -1e30 * (1 + 0.5 * u); break;
        case 6: v = 1e30; break;  // all ties: -log(67) everywhere
        default: v = 3e4 + 2 * u; break;
      }
      if (dtype == DType::kFloat32) {
        x.as<float>()[r * n + i] = static_cast<float>(v);
      } else {
        x.as<double>()[r * n + i] = v;
      }
    }
  }
  return x;
}

/// The transpose of a 2-D float32 or float64 tensor (so that LogSoftmax along axis 0 runs the column kernels).
Tensor transpose_2d(const Tensor& x) {
  const int64_t rows = x.shape()[0], n = x.shape()[1];
  Tensor t(x.dtype(), {n, rows});
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      if (x.dtype() == DType::kFloat32) {
        t.as<float>()[i * rows + r] = x.as<float>()[r * n + i];
      } else {
        t.as<double>()[i * rows + r] = x.as<double>()[r * n + i];
      }
    }
  }
  return t;
}

TEST(Softmax, LogSoftmaxOfLargeValuesKeepsFloatPrecision) {
  // Float32 tolerance (the conformance default) for both dtypes; x - (max + log(sum)) was off by
  // up to ulp(1e4) / 2 ~ 5e-4 in float32 rows near 1e4, and by log(ties) ~ 1-4 in either dtype
  // for ties at 1e30.
  const double atol = 1e-6, rtol = 1e-5;
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(dtype == DType::kFloat32 ? "float32" : "float64");
    const Tensor x = large_log_softmax_rows(dtype);
    const Tensor expected = reference_log_softmax_long_double(x);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(threads);
      OneOpGraph g;
      g.op_type = "LogSoftmax";
      g.inputs = {x};
      expect_close(run_one_op(g, threads)[0], expected, atol, rtol);  // rows
      g.inputs = {transpose_2d(x)};
      g.attrs.set("axis", Attribute::of_int(0));
      expect_close(run_one_op(g, threads)[0], transpose_2d(expected), atol, rtol);  // columns
    }
  }
  // Each ISA build of the float32 microkernels, called directly (the session picks one).
  const Tensor x = large_log_softmax_rows(DType::kFloat32);
  const Tensor expected = reference_log_softmax_long_double(x);
  const Tensor x_columns = transpose_2d(x);
  struct Isa {
    const char* name;
    bool supported;
    void (*log_rows)(const float*, float*, int64_t, int64_t);
    void (*columns)(const float*, float*, int64_t, int64_t, int64_t, bool);
  };
  const Isa isas[] = {
      {"avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), native::log_softmax_rows_avx2,
       native::normalize_column_block_avx2},
      {"avx512", static_cast<bool>(__builtin_cpu_supports("avx512f")), native::log_softmax_rows_avx512,
       native::normalize_column_block_avx512},
  };
  for (const Isa& isa : isas) {
    if (!isa.supported) continue;
    SCOPED_TRACE(isa.name);
    Tensor y(DType::kFloat32, x.shape());
    isa.log_rows(x.as<float>(), y.as<float>(), 8, 67);
    expect_close(y, expected, atol, rtol);
    Tensor y_columns(DType::kFloat32, x_columns.shape());
    isa.columns(x_columns.as<float>(), y_columns.as<float>(), 67, 8, 8, true);
    expect_close(y_columns, transpose_2d(expected), atol, rtol);
  }
}

TEST(Softmax, LogSoftmaxOfInfiniteAndNanRows) {
  // Row 0 all -Inf: NaN (-Inf - -Inf). Row 1 has a NaN: all NaN. Row 2 has one -Inf among
  // finite values: -Inf there, finite elsewhere. As before the (x - max) - log(sum) rewrite.
  const int64_t rows = 3, n = 37;
  const Tensor noise = random_float({rows, n}, 19);
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dtype : {DType::kFloat32, DType::kFloat64}) {
    SCOPED_TRACE(dtype == DType::kFloat32 ? "float32" : "float64");
    Tensor x(dtype, {rows, n});
    for (int64_t k = 0; k < rows * n; ++k) {
      double v = k < n ? -inf : 1e4 + 5.0 * noise.as<float>()[k];
      if (k == n + 20) v = std::numeric_limits<double>::quiet_NaN();
      if (k == 2 * n + 7) v = -inf;
      if (dtype == DType::kFloat32) {
        x.as<float>()[k] = static_cast<float>(v);
      } else {
        x.as<double>()[k] = v;
      }
    }
    for (int threads : {1, 2}) {
      OneOpGraph g;
      g.op_type = "LogSoftmax";
      g.inputs = {x};
      const Tensor y_rows = run_one_op(g, threads)[0];
      g.inputs = {transpose_2d(x)};
      g.attrs.set("axis", Attribute::of_int(0));
      const Tensor y_columns = transpose_2d(run_one_op(g, threads)[0]);
      for (const Tensor* result : {&y_rows, &y_columns}) {
        const Tensor& y = *result;
        for (int64_t i = 0; i < 2 * n; ++i) EXPECT_TRUE(std::isnan(y.double_at(i))) << "element " << i;
        for (int64_t i = 2 * n; i < 3 * n; ++i) {
          if (i == 2 * n + 7) {
            EXPECT_EQ(y.double_at(i), -inf);
          } else {
            EXPECT_TRUE(std::isfinite(y.double_at(i))) << "element " << i;
          }
        }
      }
    }
  }
}

TEST(Softmax, HardmaxPicksFirstMaximum) {
  Tensor x = make_float({2, 3}, {1, 3, 3, 5, 2, 5});
  OneOpGraph g;
  g.op_type = "Hardmax";
  g.inputs = {x};
  expect_close(run_one_op(g)[0], make_float({2, 3}, {0, 1, 0, 1, 0, 0}));
  g.opset = 11;  // coerced to [2, 3] as well
  g.attrs.set("axis", Attribute::of_int(0));  // one row of 6: the first 5
  expect_close(run_one_op(g)[0], make_float({2, 3}, {0, 0, 0, 1, 0, 0}));
}

TEST(ArgMax, TiesAndSelectLastIndex) {
  Tensor x = make_float({2, 3}, {2, 7, 7, 1, 1, 0});
  OneOpGraph g;
  g.op_type = "ArgMax";
  g.inputs = {x};
  g.attrs.set("axis", Attribute::of_int(1));
  g.attrs.set("keepdims", Attribute::of_int(0));
  auto out = run_one_op(g);
  EXPECT_EQ(out[0].as<int64_t>()[0], 1);
  EXPECT_EQ(out[0].as<int64_t>()[1], 0);
  g.attrs.set("select_last_index", Attribute::of_int(1));
  out = run_one_op(g);
  EXPECT_EQ(out[0].as<int64_t>()[0], 2);
  EXPECT_EQ(out[0].as<int64_t>()[1], 1);
  g.op_type = "ArgMin";
  g.attrs.set("axis", Attribute::of_int(0));
  out = run_one_op(g);
  ASSERT_EQ(out[0].shape(), Shape{3});
  EXPECT_EQ(out[0].as<int64_t>()[0], 1);
  EXPECT_EQ(out[0].as<int64_t>()[2], 1);
}

TEST(TopK, LegacyAttributeFormAndTies) {
  Tensor x = make_float({2, 4}, {1, 5, 5, 2, 9, 8, 7, 9});
  OneOpGraph g;
  g.op_type = "TopK";
  g.opset = 1;
  g.inputs = {x};
  g.num_outputs = 2;
  g.attrs.set("k", Attribute::of_int(2));
  auto out = run_one_op(g);
  expect_close(out[0], make_float({2, 2}, {5, 5, 9, 9}));
  EXPECT_EQ(out[1].as<int64_t>()[0], 1);
  EXPECT_EQ(out[1].as<int64_t>()[1], 2);
  EXPECT_EQ(out[1].as<int64_t>()[2], 0);
  EXPECT_EQ(out[1].as<int64_t>()[3], 3);
  OneOpGraph smallest;
  smallest.op_type = "TopK";
  smallest.inputs = {x};
  smallest.constants = {{1, make_int64({1}, {3})}};
  smallest.num_outputs = 2;
  smallest.attrs.set("largest", Attribute::of_int(0));
  smallest.attrs.set("axis", Attribute::of_int(0));
  EXPECT_USER_ERROR(run_one_op(smallest), "TopK_0");  // k = 3 > 2 rows
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

TEST(Softmax, Float16RunsThroughFloat32) {
  Tensor x = random_float({3, 10}, 21);
  Tensor x16(DType::kFloat16, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) {
    x16.as<uint16_t>()[i] = float_to_half(x.as<float>()[i]);
    x.as<float>()[i] = half_to_float(x16.as<uint16_t>()[i]);  // the reference sees the rounded input
  }
  OneOpGraph g;
  g.op_type = "Softmax";
  g.inputs = {x16};
  Tensor y16 = run_one_op(g)[0];
  ASSERT_EQ(y16.dtype(), DType::kFloat16);
  Tensor y(DType::kFloat32, y16.shape());
  for (int64_t i = 0; i < y.numel(); ++i) y.as<float>()[i] = half_to_float(y16.as<uint16_t>()[i]);
  expect_close(y, reference_softmax(x, 3, 10, 1, false), 1e-3, 1e-3);
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

/// One integer reduction over the last axis of a [rows, n] tensor; returns the rows' results.
template <typename T>
std::vector<T> reduce_integer_rows(const std::string& op, DType dtype, int64_t rows, const std::vector<T>& values) {
  const int64_t n = static_cast<int64_t>(values.size()) / rows;
  Tensor x(dtype, {rows, n});
  for (size_t i = 0; i < values.size(); ++i) x.as<T>()[i] = values[i];
  OneOpGraph g;
  g.op_type = op;
  g.opset = 11;  // axes as an attribute for every Reduce op
  g.inputs = {x};
  g.attrs.set("axes", Attribute::of_ints({1}));
  g.attrs.set("keepdims", Attribute::of_int(0));
  Tensor y = run_one_op(g)[0];
  EXPECT_EQ(y.dtype(), dtype);
  return std::vector<T>(y.as<T>(), y.as<T>() + y.numel());
}

// Integer inputs at the edges: sums and products wrap (two's complement, as numpy
// and ONNX Runtime compute them), and a real result outside the type's range
// (the log of 0 or of a negative sum, a huge L2) saturates or gives 0 for NaN.
// The undefined conversions these replace were found by the fuzzer under UBSan.
TEST(Reduction, IntegerEdgesWrapOrSaturateWithoutUndefinedBehaviour) {
  constexpr int32_t kMax32 = std::numeric_limits<int32_t>::max();
  constexpr int32_t kMin32 = std::numeric_limits<int32_t>::min();
  // Wrapped results, written as the 32-bit patterns of the exact int64 results (wrap32).
  EXPECT_EQ(reduce_integer_rows<int32_t>("ReduceSum", DType::kInt32, 1, {kMax32, 1, 0}),
            std::vector<int32_t>{wrap32(int64_t{kMax32} + 1)});
  EXPECT_EQ(reduce_integer_rows<int32_t>("ReduceProd", DType::kInt32, 1, {65536, 65536, 3}),
            std::vector<int32_t>{wrap32(int64_t{65536} * 65536 * 3)});
  EXPECT_EQ(reduce_integer_rows<int32_t>("ReduceSumSquare", DType::kInt32, 1, {50000, 3}),
            std::vector<int32_t>{wrap32(int64_t{50000} * 50000 + 9)});
  EXPECT_EQ(reduce_integer_rows<int32_t>("ReduceL1", DType::kInt32, 1, {kMin32, -2}),
            std::vector<int32_t>{wrap32(-int64_t{kMin32} + 2)});
  // Rows: log(0) = -inf saturates low, log(-3) = NaN gives 0, log(7) = 1.95 truncates to 1.
  EXPECT_EQ(reduce_integer_rows<int16_t>("ReduceLogSum", DType::kInt16, 3, {0, 0, -1, -2, 3, 4}),
            (std::vector<int16_t>{std::numeric_limits<int16_t>::min(), 0, 1}));
  // L2 of two int64 maxima is ~1.3e19, past int64's range: saturates high.
  constexpr int64_t kMax64 = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(reduce_integer_rows<int64_t>("ReduceL2", DType::kInt64, 1, {kMax64, kMax64}),
            std::vector<int64_t>{kMax64});
  // Mean of int8 stays exact: (-128 - 128 + 127) / 3 = -43 (truncated toward 0).
  EXPECT_EQ(reduce_integer_rows<int8_t>("ReduceMean", DType::kInt8, 1, {-128, -128, 127}),
            std::vector<int8_t>{-43});
}

}  // namespace
}  // namespace tessera::testing
