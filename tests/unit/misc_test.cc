// Unit tests of the misc family's kernels (Resize/Upsample, Einsum, the NLL
// and softmax cross-entropy losses) against plain references written here.
#include <cmath>

#include "ir/error.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

/// Naive batched matmul reference: a [b, m, k] x b [b, k, n].
Tensor reference_bmm(const Tensor& a, const Tensor& b) {
  const int64_t batch = a.shape()[0], m = a.shape()[1], k = a.shape()[2], n = b.shape()[2];
  Tensor c(DType::kFloat32, {batch, m, n});
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) s += double(a.as<float>()[(bi * m + i) * k + p]) * b.as<float>()[(bi * k + p) * n + j];
        c.as<float>()[(bi * m + i) * n + j] = static_cast<float>(s);
      }
  return c;
}

Tensor run_einsum(const std::string& equation, std::vector<Tensor> inputs, int threads = 1) {
  OneOpGraph g;
  g.op_type = "Einsum";
  g.inputs = std::move(inputs);
  g.attrs.set("equation", Attribute::of_string(equation));
  return run_one_op(g, threads)[0];
}

TEST(Einsum, BatchedMatmulFastPathMatchesReference) {
  Tensor a = random_float({3, 17, 33}, 1), b = random_float({3, 33, 600}, 2);
  expect_close(run_einsum("bij,bjk->bik", {a, b}, 2), reference_bmm(a, b), 1e-4, 1e-4);
}

TEST(Einsum, AttentionScoresTransposeTheSecondOperand) {
  // bhqd,bhkd->bhqk with b*h = 2*3 batches: compare against the bmm of k transposed.
  Tensor q = random_float({2, 3, 5, 8}, 3), k = random_float({2, 3, 7, 8}, 4);
  Tensor kt(DType::kFloat32, {6, 8, 7});
  for (int64_t bh = 0; bh < 6; ++bh)
    for (int64_t j = 0; j < 7; ++j)
      for (int64_t d = 0; d < 8; ++d) kt.as<float>()[(bh * 8 + d) * 7 + j] = k.as<float>()[(bh * 7 + j) * 8 + d];
  Tensor expected = reference_bmm(q.reshaped({6, 5, 8}), kt).reshaped({2, 3, 5, 7});
  expect_close(run_einsum("bhqd,bhkd->bhqk", {q, k}), expected, 1e-4, 1e-4);
  // The same contraction through the general loops (a trailing sum-only label forces them).
  Tensor ones = make_float({1}, {1});
  expect_close(run_einsum("bhqd,bhkd,z->bhqk", {q, k, ones}), expected, 1e-4, 1e-4);
}

TEST(Einsum, DiagonalTraceTransposeAndImplicitOutput) {
  Tensor x = make_float({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  expect_close(run_einsum("...ii->...i", {x}), make_float({2, 2}, {1, 4, 5, 8}));
  expect_close(run_einsum("bii", {x}), make_float({2}, {5, 13}));  // implicit: b only
  Tensor m = make_float({2, 3}, {1, 2, 3, 4, 5, 6});
  expect_close(run_einsum("ij->ji", {m}), make_float({3, 2}, {1, 4, 2, 5, 3, 6}));
  expect_close(run_einsum("ij", {m}), m);
  expect_close(run_einsum("ji", {m}), make_float({3, 2}, {1, 4, 2, 5, 3, 6}));  // implicit output is "ij"
  expect_close(run_einsum("i,i", {make_float({3}, {1, 2, 3}), make_float({3}, {4, 5, 6})}), make_float({}, {32}));
}

TEST(Einsum, BadEquationIsUserError) {
  EXPECT_USER_ERROR(run_einsum("ij,jk->ik", {random_float({2, 3}, 1)}), "Einsum_0");
}

OneOpGraph resize_graph(const Tensor& x, std::vector<float> scales, const std::string& mode,
                        const std::string& coordinates) {
  OneOpGraph g;
  g.op_type = "Resize";
  g.opset = 13;
  g.inputs = {x};
  g.constants = {{1, Tensor(DType::kFloat32, {0})},
                 {2, make_float({static_cast<int64_t>(scales.size())}, scales)}};
  g.attrs.set("mode", Attribute::of_string(mode));
  g.attrs.set("coordinate_transformation_mode", Attribute::of_string(coordinates));
  return g;
}

TEST(Resize, NearestUpsampleRepeats) {
  Tensor x = make_float({1, 1, 2, 2}, {1, 2, 3, 4});
  OneOpGraph g = resize_graph(x, {1, 1, 2, 3}, "nearest", "asymmetric");
  g.attrs.set("nearest_mode", Attribute::of_string("floor"));  // floor(o / scale): plain repetition
  auto out = run_one_op(g);
  expect_close(out[0], make_float({1, 1, 4, 6}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
}

TEST(Resize, LinearHalfPixelMatchesBilinearReference) {
  // Both dims growing (the innermost pass runs first), one shrinking and one growing either way (the
  // shrinking pass first), and DeepLabV3's 8x upsample, against bilinear interpolation in double.
  Tensor x = random_float({2, 3, 5, 7}, 9);
  for (const auto& [sh, sw] : std::vector<std::pair<double, double>>{{1.6, 2.3}, {0.6, 2.3}, {2.0, 0.5}, {8.0, 8.0}}) {
    SCOPED_TRACE(std::to_string(sh) + " x " + std::to_string(sw));
    auto out = run_one_op(resize_graph(x, {1, 1, static_cast<float>(sh), static_cast<float>(sw)}, "linear", "half_pixel"), 2);
    const auto oh = static_cast<int64_t>(std::floor(5 * static_cast<double>(static_cast<float>(sh))));
    const auto ow = static_cast<int64_t>(std::floor(7 * static_cast<double>(static_cast<float>(sw))));
    Tensor expected(DType::kFloat32, {2, 3, oh, ow});
    auto coord = [](int64_t o, double s, int64_t in, int64_t* lo, int64_t* hi, double* w) {
      double xo = std::clamp((o + 0.5) / static_cast<double>(static_cast<float>(s)) - 0.5, 0.0, double(in - 1));
      *lo = static_cast<int64_t>(std::floor(xo));
      *hi = std::min(*lo + 1, in - 1);
      *w = xo - *lo;
    };
    for (int64_t p = 0; p < 6; ++p)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t y0, y1, x0, x1;
          double wy, wx;
          coord(i, sh, 5, &y0, &y1, &wy);
          coord(j, sw, 7, &x0, &x1, &wx);
          auto at = [&](int64_t r, int64_t c) { return double(x.as<float>()[(p * 5 + r) * 7 + c]); };
          double v = (1 - wy) * ((1 - wx) * at(y0, x0) + wx * at(y0, x1)) + wy * ((1 - wx) * at(y1, x0) + wx * at(y1, x1));
          expected.as<float>()[(p * oh + i) * ow + j] = static_cast<float>(v);
        }
    expect_close(out[0], expected, 1e-5, 1e-4);
  }
}

TEST(Resize, LegacyUpsampleAttributeForm) {
  OneOpGraph g;
  g.op_type = "Upsample";
  g.opset = 7;
  g.inputs = {make_float({1, 2}, {1, 2})};
  g.attrs.set("scales", Attribute::of_floats({1, 2}));
  expect_close(run_one_op(g)[0], make_float({1, 4}, {1, 1, 2, 2}));
}

/// Reference NLL over [N, C] with optional weights and ignore index.
double reference_nll_mean(const Tensor& logp, const std::vector<int64_t>& target, const std::vector<float>& w,
                          int64_t ignore) {
  const int64_t c = logp.shape()[1];
  double loss = 0, total = 0;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == ignore) continue;
    double wi = w.empty() ? 1.0 : w[static_cast<size_t>(target[i])];
    loss -= logp.as<float>()[static_cast<int64_t>(i) * c + target[i]] * wi;
    total += wi;
  }
  return loss / total;
}

TEST(Loss, NllAndSoftmaxCrossEntropyMeanWithWeightsAndIgnore) {
  Tensor x = random_float({4, 3}, 5);
  std::vector<int64_t> target = {0, 2, 1, 2};
  std::vector<float> w = {0.5f, 2.0f, 1.5f};
  OneOpGraph g;
  g.op_type = "NegativeLogLikelihoodLoss";
  g.inputs = {x, make_int64({4}, target), make_float({3}, w)};
  g.attrs.set("ignore_index", Attribute::of_int(1));
  auto out = run_one_op(g);
  EXPECT_NEAR(out[0].as<float>()[0], reference_nll_mean(x, target, w, 1), 1e-5);

  Tensor logp(DType::kFloat32, {4, 3});
  for (int64_t i = 0; i < 4; ++i) {
    double s = 0;
    for (int64_t c = 0; c < 3; ++c) s += std::exp(double(x.as<float>()[i * 3 + c]));
    for (int64_t c = 0; c < 3; ++c) logp.as<float>()[i * 3 + c] = static_cast<float>(x.as<float>()[i * 3 + c] - std::log(s));
  }
  g.op_type = "SoftmaxCrossEntropyLoss";
  g.num_outputs = 2;
  out = run_one_op(g);
  EXPECT_NEAR(out[0].as<float>()[0], reference_nll_mean(logp, target, w, 1), 1e-5);
  expect_close(out[1], logp, 1e-6, 1e-5);
}

TEST(Loss, TargetOutOfRangeIsUserError) {
  OneOpGraph g;
  g.op_type = "NegativeLogLikelihoodLoss";
  g.inputs = {random_float({2, 3}, 1), make_int64({2}, {0, 3})};
  EXPECT_USER_ERROR(run_one_op(g), "NegativeLogLikelihoodLoss_0");
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

std::vector<int32_t> int32_values(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::kInt32);
  return std::vector<int32_t>(t.as<int32_t>(), t.as<int32_t>() + t.numel());
}

// Integer arithmetic past the type's range wraps around (int32 and int64: the cases C++ leaves
// undefined, which the sanitizer build reports), and Gemm's alpha and beta on integers saturate
// instead of casting an out-of-range double.
TEST(IntegerArithmetic, OverflowWrapsAndScaledResultsSaturate) {
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max(), kMin = std::numeric_limits<int32_t>::min();
  const Tensor a = make_int32({4}, {kMax, kMin, 70000, -5}), b = make_int32({4}, {1, -1, 70000, 3});
  for (const auto& [op, expected] : std::vector<std::pair<std::string, std::vector<int32_t>>>{
           {"Add", {wrap32(int64_t{kMax} + 1), wrap32(int64_t{kMin} - 1), 140000, -2}},
           {"Sub", {wrap32(int64_t{kMax} - 1), wrap32(int64_t{kMin} + 1), 0, -8}},
           {"Mul", {kMax, wrap32(-int64_t{kMin}), wrap32(int64_t{70000} * 70000), -15}}}) {
    SCOPED_TRACE(op);
    OneOpGraph g;
    g.op_type = op;
    g.inputs = {a, b};
    EXPECT_EQ(int32_values(run_one_op(g)[0]), expected);
  }
  // int64 too (its product of two 2^40s wraps to 0 mod 2^64).
  OneOpGraph mul64;
  mul64.op_type = "Mul";
  mul64.inputs = {make_int64({2}, {int64_t{1} << 40, std::numeric_limits<int64_t>::max()}), make_int64({2}, {int64_t{1} << 40, 2})};
  const Tensor p = run_one_op(mul64)[0];
  EXPECT_EQ(p.as<int64_t>()[0], 0);
  EXPECT_EQ(p.as<int64_t>()[1], -2);
  // Pow by squaring on uint16 (which C++ promotes to int: 65535 * 65535 overflows int) and int32.
  OneOpGraph pow16;
  pow16.op_type = "Pow";
  Tensor base16(DType::kUInt16, {2}), exponent16(DType::kUInt16, {2});
  base16.as<uint16_t>()[0] = 65535;
  base16.as<uint16_t>()[1] = 300;
  exponent16.as<uint16_t>()[0] = 2;
  exponent16.as<uint16_t>()[1] = 3;
  pow16.inputs = {base16, exponent16};
  const Tensor powered16 = run_one_op(pow16)[0];
  EXPECT_EQ(powered16.as<uint16_t>()[0], static_cast<uint16_t>(uint64_t{65535} * 65535 % 65536));
  EXPECT_EQ(powered16.as<uint16_t>()[1], static_cast<uint16_t>(uint64_t{300} * 300 * 300 % 65536));
  OneOpGraph pow32;
  pow32.op_type = "Pow";
  pow32.inputs = {make_int32({1}, {70000}), make_int32({1}, {3})};
  EXPECT_EQ(int32_values(run_one_op(pow32)[0]), std::vector<int32_t>{wrap32(int64_t{70000} * 70000 * 70000)});
  // CumSum along the axis, inclusive: kMax, kMax + 1 (wrapped), and back.
  OneOpGraph cum;
  cum.op_type = "CumSum";
  cum.inputs = {make_int32({3}, {kMax, 1, -1})};
  cum.constants = {{1, make_int64({}, {0})}};
  EXPECT_EQ(int32_values(run_one_op(cum)[0]), (std::vector<int32_t>{kMax, kMin, kMax}));
  // Gemm on int32 with alpha 3 and beta 2: A * B = [2e9], saturating at int32's maximum; beta * C
  // = -4e9 saturating at its minimum; their sum wraps (-1). Exact where the factors are 1.
  OneOpGraph gemm;
  gemm.op_type = "Gemm";
  gemm.inputs = {make_int32({1, 2}, {1000000000, 1000000000}), make_int32({2, 1}, {1, 1}), make_int32({1, 1}, {-2000000000})};
  gemm.attrs.set("alpha", Attribute::of_float(3.0f));
  gemm.attrs.set("beta", Attribute::of_float(2.0f));
  EXPECT_EQ(int32_values(run_one_op(gemm)[0]), std::vector<int32_t>{wrap32(int64_t{kMax} + kMin)});
  gemm.attrs.set("alpha", Attribute::of_float(1.0f));
  gemm.attrs.set("beta", Attribute::of_float(1.0f));
  gemm.inputs[2] = make_int32({1, 1}, {kMax});
  EXPECT_EQ(int32_values(run_one_op(gemm)[0]), std::vector<int32_t>{wrap32(int64_t{2000000000} + kMax)});
}

}  // namespace
}  // namespace tessera::testing
