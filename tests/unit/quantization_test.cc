// Tests of the quantization family: QuantizeLinear / DequantizeLinear /
// DynamicQuantizeLinear against hand-computed values (ties to even,
// saturation) and the references, and the integer products (MatMulInteger,
// QLinearMatMul, ConvInteger, QLinearConv) against the references on random
// data with odd shapes, per-row / per-column / per-channel parameters,
// groups, strides, dilations and padding, on one and several threads.
#include <gtest/gtest.h>

#include <random>

#include "backends/native/kernels/quantization_internal.h"
#include "backends/native/thread_pool.h"
#include "cpu_isa.h"
#include "test_util.h"

namespace tessera {
namespace {

using native::ReferenceConvGeometry;
using testing::expect_close;
using testing::make_float;
using testing::OneOpGraph;
using testing::random_float;
using testing::run_one_op;

/// Deterministic pseudo-random integers over the whole range of an 8-bit dtype (or [-2^20, 2^20) for int32).
Tensor random_integers(DType dtype, Shape shape, uint32_t seed) {
  Tensor t(dtype, std::move(shape));
  uint32_t state = seed * 2654435761u + 7;
  for (int64_t i = 0; i < t.numel(); ++i) {
    state = state * 1664525u + 1013904223u;
    const uint32_t bits = state >> 8;
    if (dtype == DType::kUInt8) t.as<uint8_t>()[i] = static_cast<uint8_t>(bits);
    if (dtype == DType::kInt8) t.as<int8_t>()[i] = static_cast<int8_t>(bits);
    if (dtype == DType::kInt32) t.as<int32_t>()[i] = static_cast<int32_t>(bits % (1u << 21)) - (1 << 20);
  }
  return t;
}

Tensor scalar_of(DType dtype, int64_t value) {
  Tensor t(dtype, {});
  if (dtype == DType::kUInt8) t.as<uint8_t>()[0] = static_cast<uint8_t>(value);
  if (dtype == DType::kInt8) t.as<int8_t>()[0] = static_cast<int8_t>(value);
  if (dtype == DType::kInt32) t.as<int32_t>()[0] = static_cast<int32_t>(value);
  return t;
}

/// Positive scales in [lo, hi).
Tensor random_scales(Shape shape, uint32_t seed, float lo, float hi) {
  Tensor t = random_float(std::move(shape), seed);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = lo + (t.as<float>()[i] + 1.0f) * 0.5f * (hi - lo);
  return t;
}

void expect_equal(const Tensor& actual, const Tensor& expected) { expect_close(actual, expected, 0.0, 0.0); }

AttributeMap axis_attr(int64_t axis) {
  AttributeMap a;
  a.set("axis", Attribute::of_int(axis));
  return a;
}

// ------------------------------------------------ Quantize / Dequantize ----

TEST(QuantizeLinear, RoundsHalfToEvenAndSaturates) {
  // scale 2: quotients 0.5, 1.5, 2.5, -0.5, -1.5 round to 0, 2, 2, -0, -2; 500 and -500 saturate.
  const Tensor x = make_float({7}, {1, 3, 5, -1, -3, 1000, -1000});
  const Tensor scale = make_float({}, {2.0f});
  auto y = run_one_op({.op_type = "QuantizeLinear", .inputs = {x, scale, scalar_of(DType::kUInt8, 128)}});
  const uint8_t expected_u8[] = {128, 130, 130, 128, 126, 255, 0};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(y[0].as<uint8_t>()[i], expected_u8[i]) << i;
  y = run_one_op({.op_type = "QuantizeLinear", .inputs = {x, scale, scalar_of(DType::kInt8, -3)}});
  const int8_t expected_i8[] = {-3, -1, -1, -3, -5, 127, -128};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(y[0].as<int8_t>()[i], expected_i8[i]) << i;
  // No zero point: uint8 with zero point 0.
  y = run_one_op({.op_type = "QuantizeLinear", .inputs = {x, scale}});
  ASSERT_EQ(y[0].dtype(), DType::kUInt8);
  EXPECT_EQ(y[0].as<uint8_t>()[2], 2);
  EXPECT_EQ(y[0].as<uint8_t>()[4], 0);
}

TEST(QuantizeLinear, MatchesReferencePerTensorAndPerAxis) {
  const Shape shape = {3, 5, 7, 2};
  Tensor x = random_float(shape, 1);
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] *= 3.0f;
  for (DType q : {DType::kUInt8, DType::kInt8}) {
    for (int64_t axis : {0, 1, 2, -1}) {
      SCOPED_TRACE(std::string(dtype_name(q)) + " axis " + std::to_string(axis));
      const int64_t channels = shape[static_cast<size_t>(axis < 0 ? axis + 4 : axis)];
      const Tensor scale = random_scales({channels}, 2 + static_cast<uint32_t>(axis), 0.005f, 0.05f);
      const Tensor zero_point = random_integers(q, {channels}, 3);
      for (int threads : {1, 3}) {
        auto y = run_one_op({.op_type = "QuantizeLinear", .inputs = {x, scale, zero_point}, .attrs = axis_attr(axis)}, threads);
        expect_equal(y[0], native::reference_quantize_linear(x, scale, &zero_point, axis));
      }
    }
    const Tensor scale = make_float({1}, {0.01f});
    const Tensor zero_point = scalar_of(q, 5);
    auto y = run_one_op({.op_type = "QuantizeLinear", .opset = 10, .inputs = {x, scale, zero_point}});
    expect_equal(y[0], native::reference_quantize_linear(x, scale, &zero_point, 1));
  }
}

TEST(QuantizeLinear, Int32Input) {
  const Tensor x = random_integers(DType::kInt32, {4, 33}, 4);
  const Tensor scale = make_float({}, {4096.0f});
  const Tensor zero_point = scalar_of(DType::kInt8, 1);
  auto y = run_one_op({.op_type = "QuantizeLinear", .inputs = {x, scale, zero_point}});
  expect_equal(y[0], native::reference_quantize_linear(x, scale, &zero_point, 1));
}

TEST(DequantizeLinear, MatchesReference) {
  const Shape shape = {2, 3, 5};
  for (DType q : {DType::kUInt8, DType::kInt8}) {
    const Tensor x = random_integers(q, shape, 5);
    for (int64_t axis : {0, 1, -1}) {
      const int64_t channels = shape[static_cast<size_t>(axis < 0 ? axis + 3 : axis)];
      const Tensor scale = random_scales({channels}, 6, 0.01f, 1.0f);
      const Tensor zero_point = random_integers(q, {channels}, 7);
      auto y = run_one_op({.op_type = "DequantizeLinear", .inputs = {x, scale, zero_point}, .attrs = axis_attr(axis)});
      expect_equal(y[0], native::reference_dequantize_linear(x, scale, &zero_point, axis));
    }
    auto y = run_one_op({.op_type = "DequantizeLinear", .inputs = {x, make_float({}, {0.5f})}});
    expect_equal(y[0], native::reference_dequantize_linear(x, make_float({}, {0.5f}), nullptr, 1));
  }
  // Hand-checked: (x - zero_point) * scale.
  Tensor x = random_integers(DType::kUInt8, {3}, 0);
  x.as<uint8_t>()[0] = 0;
  x.as<uint8_t>()[1] = 128;
  x.as<uint8_t>()[2] = 255;
  auto y = run_one_op({.op_type = "DequantizeLinear", .inputs = {x, make_float({}, {0.5f}), scalar_of(DType::kUInt8, 128)}});
  expect_equal(y[0], make_float({3}, {-64.0f, 0.0f, 63.5f}));
  const Tensor x32 = random_integers(DType::kInt32, {17}, 8);
  y = run_one_op({.op_type = "DequantizeLinear", .inputs = {x32, make_float({}, {0.25f})}});
  expect_equal(y[0], native::reference_dequantize_linear(x32, make_float({}, {0.25f}), nullptr, 1));
}

TEST(DequantizeLinear, Int32WithNonZeroZeroPointIsUserError) {
  EXPECT_USER_ERROR(run_one_op({.op_type = "DequantizeLinear",
                                 .inputs = {random_integers(DType::kInt32, {4}, 1), make_float({}, {1.0f}),
                                            scalar_of(DType::kInt32, 3)}}),
                    "DequantizeLinear_0");
}

TEST(QuantizeLinear, PerAxisScaleOfWrongLengthIsUserError) {
  EXPECT_USER_ERROR(run_one_op({.op_type = "QuantizeLinear",
                                 .inputs = {random_float({2, 3}, 1), make_float({2}, {1.0f, 2.0f})},
                                 .attrs = axis_attr(1)}),
                    "QuantizeLinear_0");
}

TEST(DynamicQuantizeLinear, MatchesReferenceAndSpecExample) {
  // Mixed signs, all positive, all negative (min/max widen to include 0), all zero.
  for (const Tensor& x : {random_float({5, 37}, 9), make_float({4}, {1.0f, 2.5f, 3.0f, 10.0f}),
                          make_float({3}, {-1.0f, -2.0f, -0.5f}), make_float({2}, {0.0f, 0.0f})}) {
    auto y = run_one_op({.op_type = "DynamicQuantizeLinear", .inputs = {x}, .num_outputs = 3}, 3);
    auto expected = native::reference_dynamic_quantize_linear(x);
    for (int i = 0; i < 3; ++i) expect_equal(y[static_cast<size_t>(i)], expected[static_cast<size_t>(i)]);
  }
  // All positive: zero point 0, scale max / 255, the max maps to 255.
  auto y = run_one_op({.op_type = "DynamicQuantizeLinear", .inputs = {make_float({2}, {0.5f, 2.55f})}, .num_outputs = 3});
  EXPECT_EQ(y[2].as<uint8_t>()[0], 0);
  EXPECT_FLOAT_EQ(y[1].as<float>()[0], 2.55f / 255.0f);
  EXPECT_EQ(y[0].as<uint8_t>()[1], 255);
}

TEST(QuantizeSpans, EveryBuildThisCpuRunsMatchesTheReferenceAndSkipsNaNInTheRange) {
  // 1000 values (past the 64-lane blocks and a tail) with ties, saturating values, infinities,
  // signed zeros and NaN, quantized by each ISA build of the span against the plain reference
  // (nearbyint-based, in double), and the range (NaN skipped) against std::min / std::max loops.
  std::vector<float> x(1000);
  const Tensor noise = random_float({1000}, 41);
  for (size_t i = 0; i < x.size(); ++i) x[i] = noise.as<float>()[i] * 3.0f;
  const float specials[] = {0.25f, 0.75f, -0.25f, 1.25f, 63.75f, -32.25f, 1e9f, -1e9f, INFINITY, -INFINITY, -0.0f, NAN};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; ++i) x[37 * i + 5] = specials[i];
  // NaN after -inf (index 338) and +inf (301) in their 64-lane columns, in the last full block,
  // so a range that let NaN replace a lane's minimum or maximum would lose the extreme; and in the tail.
  x[338 + 64 * 9] = NAN;
  x[301 + 64 * 10] = NAN;
  x[990] = NAN;
  x[999] = -7.0f;  // the minimum, in the tail past the last 64-lane block
  x[3] = 6.5f;     // the maximum, in the first block
  __builtin_cpu_init();
  std::vector<std::pair<const char*, native::QuantizeSpans>> builds = {{"portable", native::quantize_spans_portable()}};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) builds.push_back({"avx2", native::quantize_spans_avx2()});
  if (testing::cpu_isa::cpu_flags().count("avx512bw") && testing::cpu_isa::cpu_flags().count("avx512dq") &&
      testing::cpu_isa::cpu_flags().count("avx512vl")) {
    builds.push_back({"avx512", native::quantize_spans_avx512()});
  }
  Tensor input = make_float({1000}, x);
  const float scale = 0.5f;
  for (DType q : {DType::kUInt8, DType::kInt8}) {
    const Tensor zero_point = scalar_of(q, q == DType::kUInt8 ? 100 : -3);
    const Tensor expected = native::reference_quantize_linear(input, make_float({}, {scale}), &zero_point, 1);
    for (const auto& [name, spans] : builds) {
      SCOPED_TRACE(std::string(name) + " " + dtype_name(q));
      Tensor y(q, {1000});
      const int32_t z = q == DType::kUInt8 ? 100 : -3;
      if (q == DType::kUInt8) spans.to_uint8(x.data(), 1000, scale, z, y.as<uint8_t>());
      if (q == DType::kInt8) spans.to_int8(x.data(), 1000, scale, z, y.as<int8_t>());
      expect_equal(y, expected);
    }
  }
  float lo = 0.0f, hi = 0.0f;
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  for (const auto& [name, spans] : builds) {
    SCOPED_TRACE(name);
    for (int64_t n : {int64_t{1000}, int64_t{64}, int64_t{3}, int64_t{0}}) {
      float range_lo = 1.0f, range_hi = -1.0f, want_lo = 0.0f, want_hi = 0.0f;
      for (int64_t i = 0; i < n; ++i) want_lo = std::min(want_lo, x[static_cast<size_t>(i)]), want_hi = std::max(want_hi, x[static_cast<size_t>(i)]);
      spans.range(x.data(), n, &range_lo, &range_hi);
      EXPECT_EQ(range_lo, want_lo) << n;
      EXPECT_EQ(range_hi, want_hi) << n;
    }
  }
  EXPECT_EQ(lo, -INFINITY);
  EXPECT_EQ(hi, INFINITY);
}

// ------------------------------------------------------ integer MatMul ----

TEST(QuantizeRounding, QuantizeValueMatchesNearbyintAndSaturation) {
  // Ties both ways, values next to 2^23 / 2^52, signed zeros, infinities and
  // NaN, and a sweep of quarter steps, against saturate(nearbyint(v) + zero
  // point) written out with libm, NaN to the lowest value.
  std::vector<double> values = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 254.5, 255.5, -128.5, 127.5,
                                8388607.5, 8388608.0, 8388609.0, -8388607.5, 16777215.0, 4503599627370495.5,
                                -0.0, 0.0, 1e30, -1e30, INFINITY, -INFINITY};
  for (int i = -2000; i <= 2000; ++i) values.push_back(i * 0.25);
  auto expected = [](double v, int32_t z, double lo, double hi) {
    if (std::isnan(v)) return lo;
    return std::min(hi, std::max(lo, std::nearbyint(v) + z));
  };
  for (double v : values) {
    for (int32_t z : {0, 3, 128, 255}) {
      EXPECT_EQ(native::quantize_value<uint8_t>(static_cast<float>(v), z), expected(static_cast<float>(v), z, 0, 255)) << v;
      EXPECT_EQ(native::quantize_value<uint8_t>(v, z), expected(v, z, 0, 255)) << v;
    }
    for (int32_t z : {-128, -3, 0, 127}) {
      EXPECT_EQ(native::quantize_value<int8_t>(static_cast<float>(v), z), expected(static_cast<float>(v), z, -128, 127)) << v;
      EXPECT_EQ(native::quantize_value<int8_t>(v, z), expected(v, z, -128, 127)) << v;
    }
  }
  EXPECT_EQ(native::quantize_value<uint8_t>(NAN, 7), 0);
  EXPECT_EQ(native::quantize_value<int8_t>(static_cast<double>(NAN), 7), -128);
}

TEST(IntegerGemm, MatchesReferenceAcrossBlockEdges) {
  // Plain int64 loops over operands spanning the whole adjusted range [-255, 255]
  // (extremes included): m = 13 leaves partial row tiles on every ISA (4, 6, 8
  // rows), n = 75 partial 16- and 32-column panels, k = 1031 an odd last pair
  // and three K blocks of 512; A is read with a row stride wider than k.
  const int64_t m = 13, n = 75, k = 1031, lda = k + 5;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> value(-255, 255);
  std::vector<int16_t> a(static_cast<size_t>(m * lda)), b(static_cast<size_t>(k * n));
  for (auto& v : a) v = static_cast<int16_t>(value(rng));
  for (auto& v : b) v = static_cast<int16_t>(value(rng));
  for (int64_t j = 0; j < k; ++j) a[static_cast<size_t>(j)] = j % 2 ? 255 : -255;
  for (int64_t j = 0; j < n; ++j) b[static_cast<size_t>(j)] = -255;
  std::vector<int32_t> expected(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      int64_t sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += int64_t{a[static_cast<size_t>(i * lda + p)]} * b[static_cast<size_t>(p * n + j)];
      expected[static_cast<size_t>(i * n + j)] = static_cast<int32_t>(sum);
    }
  }
  std::vector<int16_t> packed(static_cast<size_t>(native::packed_integer_b_size(k, n)));
  native::pack_integer_b(k, n, b.data(), n, packed.data());
  // Every ISA build this CPU can run, on the whole matrix and from a later panel on.
  __builtin_cpu_init();
  std::vector<std::pair<const char*, native::IntegerGemmTilesFn>> builds = {{"portable", native::integer_gemm_tiles_portable}};
  if (__builtin_cpu_supports("avx2")) builds.push_back({"avx2", native::integer_gemm_tiles_avx2});
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) builds.push_back({"avx512", native::integer_gemm_tiles_avx512});
  for (const auto& [name, tiles] : builds) {
    SCOPED_TRACE(name);
    std::vector<int32_t> c(static_cast<size_t>(m * n), -1);
    tiles(m, n, k, a.data(), lda, packed.data(), c.data(), n);
    EXPECT_EQ(c, expected);
    std::vector<int32_t> tail(static_cast<size_t>(m * n), -1);
    const int64_t j0 = 2 * native::kIntegerGemmPanel, panel_stride = native::integer_panel_stride(k);
    tiles(m, n - j0, k, a.data(), lda, packed.data() + 2 * panel_stride, tail.data() + j0, n);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = j0; j < n; ++j) ASSERT_EQ(tail[static_cast<size_t>(i * n + j)], expected[static_cast<size_t>(i * n + j)]);
    }
  }
  // The threaded driver.
  native::ThreadPool pool(3);
  std::vector<int32_t> c(static_cast<size_t>(m * n), -1);
  native::integer_gemm_packed(m, n, k, a.data(), lda, packed.data(), c.data(), n, pool);
  EXPECT_EQ(c, expected);
}

TEST(QuadGemm, RunsWhereTheCpuHasVnniAndMatchesPlainLoopsAcrossBlockEdges) {
  // The u8 x s8 GEMM (vpdpbusd) is used exactly where /proc/cpuinfo (as TESSERA_ISA caps it) says
  // AVX512_VNNI is there; elsewhere MatMulInteger.MatchesReference covers the int16 path.
  ASSERT_EQ(native::quad_gemm_available(), testing::cpu_isa::native_avx512_vnni());
  if (!native::quad_gemm_available()) return;
  // Plain int64 loops: m = 13 leaves a partial 8-row tile, n = 75 partial 32- and 16-column tiles,
  // k = 1031 two K blocks (1024 and 7, the last quad of 3); the extremes of every dtype sit in the
  // first row and column, and zero points per row / per column reach their extremes too.
  const int64_t m = 13, n = 75, k = 1031;
  for (DType at : {DType::kUInt8, DType::kInt8}) {
    for (DType bt : {DType::kUInt8, DType::kInt8}) {
      for (bool per_axis : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(at)) + " x " + dtype_name(bt) + (per_axis ? " per axis" : " per tensor"));
        Tensor a = random_integers(at, {m, k}, 31), b = random_integers(bt, {k, n}, 32);
        auto value = [](const Tensor& t, int64_t i) -> int64_t {
          return t.dtype() == DType::kUInt8 ? int64_t{t.as<uint8_t>()[i]} : int64_t{t.as<int8_t>()[i]};
        };
        auto set = [](Tensor& t, int64_t i, bool high) {
          if (t.dtype() == DType::kUInt8) t.as<uint8_t>()[i] = high ? 255 : 0;
          if (t.dtype() == DType::kInt8) t.as<int8_t>()[i] = high ? 127 : -128;
        };
        for (int64_t p = 0; p < k; ++p) set(a, p, p % 2 == 0);      // row 0 alternates the extremes
        for (int64_t p = 0; p < k; ++p) set(b, p * n, p % 2 != 0);  // column 0 opposite them
        Tensor za = per_axis ? random_integers(at, {m}, 33) : scalar_of(at, at == DType::kUInt8 ? 255 : -128);
        Tensor zb = per_axis ? random_integers(bt, {n}, 34) : scalar_of(bt, bt == DType::kUInt8 ? 0 : 127);
        if (per_axis) set(za, 0, false), set(zb, 0, true);
        std::vector<int32_t> expected(static_cast<size_t>(m * n));
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            const int64_t zai = value(za, per_axis ? i : 0), zbj = value(zb, per_axis ? j : 0);
            int64_t sum = 0;
            for (int64_t p = 0; p < k; ++p) sum += (value(a, i * k + p) - zai) * (value(b, p * n + j) - zbj);
            expected[static_cast<size_t>(i * n + j)] = static_cast<int32_t>(sum);
          }
        }
        native::QuadPackedB packed;
        const TensorView zb_view = zb.view(), za_view = za.view();
        native::pack_quad_b(b.view(), &zb_view, k, n, 0, packed);
        std::vector<uint8_t> shifted(static_cast<size_t>(m * k));
        native::QuadA quad;
        native::quad_a(a.view(), m, k, 0, &za_view, shifted.data(), quad);
        for (int threads : {1, 3}) {
          native::ThreadPool pool(threads);
          std::vector<int32_t> c(static_cast<size_t>(m * n), -1);
          native::quad_gemm_packed(m, quad, packed, c.data(), n, pool);
          EXPECT_EQ(c, expected);
        }
      }
    }
  }
}

TEST(MatMulInteger, MatchesReference) {
  struct Case { Shape a, b; bool per_row, per_column; };
  const Case cases[] = {{{7, 13}, {13, 9}, false, false}, {{7, 13}, {13, 9}, true, true},
                        {{2, 1, 5, 17}, {3, 17, 6}, true, false}, {{13}, {13, 4}, false, true},
                        {{3, 13}, {13}, true, false}, {{33, 70}, {70, 260}, true, true},
                        {{9, 1027}, {1027, 40}, true, true}};
  for (const Case& c : cases) {
    for (DType at : {DType::kUInt8, DType::kInt8}) {
      for (DType bt : {DType::kUInt8, DType::kInt8}) {
        SCOPED_TRACE(shape_to_string(c.a) + " x " + shape_to_string(c.b) + " " + dtype_name(at) + " " + dtype_name(bt));
        const Tensor a = random_integers(at, c.a, 11), b = random_integers(bt, c.b, 12);
        const int64_t m = c.a.size() == 1 ? 1 : c.a[c.a.size() - 2], n = c.b.size() == 1 ? 1 : c.b.back();
        const Tensor a_zero_point = c.per_row ? random_integers(at, {m}, 13) : scalar_of(at, at == DType::kUInt8 ? 131 : -7);
        const Tensor b_zero_point = c.per_column ? random_integers(bt, {n}, 14) : scalar_of(bt, bt == DType::kUInt8 ? 120 : 3);
        const Tensor expected = native::reference_matmul_integer(a, b, &a_zero_point, &b_zero_point);
        for (int threads : {1, 3}) {
          auto y = run_one_op({.op_type = "MatMulInteger", .inputs = {a, b, a_zero_point, b_zero_point}}, threads);
          expect_equal(y[0], expected);
        }
        // Constant B (a weight) and no zero points.
        auto y = run_one_op({.op_type = "MatMulInteger", .inputs = {a}, .constants = {{1, b}}});
        expect_equal(y[0], native::reference_matmul_integer(a, b, nullptr, nullptr));
        // Constant B with a constant zero point (widened and packed at compile time), and
        // with a zero point fed at run time (which the compiled packing must not assume).
        for (int threads : {1, 3}) {
          auto packed = run_one_op({.op_type = "MatMulInteger", .inputs = {a, a_zero_point},
                                    .constants = {{1, b}, {3, b_zero_point}}}, threads);
          expect_equal(packed[0], expected);
          auto fed = run_one_op({.op_type = "MatMulInteger", .inputs = {a, a_zero_point, b_zero_point}, .constants = {{1, b}}},
                                threads);
          expect_equal(fed[0], expected);
        }
      }
    }
  }
}

TEST(QLinearMatMul, MatchesReference) {
  struct Case { Shape a, b; bool per_column; DType out; };
  const Case cases[] = {{{2, 4}, {4, 3}, false, DType::kUInt8}, {{5, 3, 19}, {19, 11}, true, DType::kInt8},
                        {{2, 7, 30}, {2, 30, 270}, true, DType::kUInt8}};
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_to_string(c.a) + " x " + shape_to_string(c.b));
    const Tensor a = random_integers(DType::kUInt8, c.a, 21), b = random_integers(DType::kInt8, c.b, 22);
    const int64_t n = c.b.back();
    const Tensor a_scale = make_float({}, {0.02f}), y_scale = make_float({}, {0.9f});
    const Tensor b_scale = c.per_column ? random_scales({n}, 23, 0.01f, 0.05f) : make_float({}, {0.03f});
    const Tensor b_zero_point = c.per_column ? random_integers(DType::kInt8, {n}, 24) : scalar_of(DType::kInt8, -2);
    const Tensor a_zero_point = scalar_of(DType::kUInt8, 113), y_zero_point = scalar_of(c.out, c.out == DType::kUInt8 ? 128 : 0);
    const Tensor expected =
        native::reference_qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point);
    for (int threads : {1, 3}) {
      auto y = run_one_op({.op_type = "QLinearMatMul", .inputs = {a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point}},
                          threads);
      expect_equal(y[0], expected);
    }
  }
}

// -------------------------------------------------------- integer Conv ----

struct ConvCase {
  Shape x, w;
  int64_t group;
  std::vector<int64_t> stride, dilation, pads;
  bool per_channel;
};

const ConvCase kConvCases[] = {
    {{1, 3, 7, 9}, {5, 3, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, false},
    {{2, 4, 11, 6}, {6, 2, 3, 2}, 2, {2, 1}, {1, 2}, {0, 1, 2, 0}, true},
    {{1, 6, 9, 9}, {6, 1, 3, 3}, 6, {2, 2}, {1, 1}, {1, 1, 1, 1}, true},    // depthwise
    {{2, 8, 5, 5}, {12, 8, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}, true},   // pointwise
    {{1, 3, 13}, {4, 3, 4}, 1, {3}, {2}, {2, 1}, false},                     // 1-D
    {{1, 2, 4, 5, 6}, {3, 2, 2, 3, 2}, 1, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 0, 1, 1}, true},  // 3-D
    {{1, 16, 12, 12}, {20, 16, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},  // many channel blocks
    // Pixel tiles that start and end inside output rows, a tail panel, and images side by side.
    {{2, 32, 23, 29}, {40, 32, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true},
    {{1, 16, 17, 19}, {32, 8, 3, 3}, 2, {2, 1}, {1, 2}, {2, 1, 0, 2}, true},  // groups of 16 output channels
    {{1, 3, 300, 7}, {9, 3, 5, 1}, 1, {1, 1}, {1, 1}, {2, 0, 2, 0}, false},   // a depth of 15 (no whole quad)
    {{1, 8, 12, 14}, {16, 8, 3, 3}, 1, {1, 1}, {2, 2}, {2, 2, 2, 2}, true},  // dilated, output as large as X
    {{1, 4, 3, 6, 5}, {16, 4, 3, 3, 3}, 1, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, false},  // 3-D, as large as X
};

AttributeMap conv_attrs(const ConvCase& c) {
  AttributeMap a;
  a.set("group", Attribute::of_int(c.group));
  a.set("strides", Attribute::of_ints(c.stride));
  a.set("dilations", Attribute::of_ints(c.dilation));
  a.set("pads", Attribute::of_ints(c.pads));
  return a;
}

ReferenceConvGeometry reference_geometry(const ConvCase& c) {
  const size_t r = c.x.size() - 2;
  return {c.group, c.stride, c.dilation, std::vector<int64_t>(c.pads.begin(), c.pads.begin() + static_cast<std::ptrdiff_t>(r)),
          std::vector<int64_t>(c.pads.begin() + static_cast<std::ptrdiff_t>(r), c.pads.end())};
}

TEST(ConvInteger, MatchesReference) {
  uint32_t seed = 30;
  for (const ConvCase& c : kConvCases) {
    SCOPED_TRACE(shape_to_string(c.x) + " * " + shape_to_string(c.w) + " group " + std::to_string(c.group));
    const Tensor x = random_integers(DType::kUInt8, c.x, ++seed), w = random_integers(DType::kInt8, c.w, ++seed);
    const Tensor x_zero_point = scalar_of(DType::kUInt8, 77);
    const Tensor w_zero_point = c.per_channel ? random_integers(DType::kInt8, {c.w[0]}, ++seed) : scalar_of(DType::kInt8, 5);
    const Tensor expected = native::reference_conv_integer(x, w, &x_zero_point, &w_zero_point, reference_geometry(c));
    for (int threads : {1, 3}) {
      auto y = run_one_op({.op_type = "ConvInteger", .inputs = {x, w, x_zero_point, w_zero_point}, .attrs = conv_attrs(c)}, threads);
      expect_equal(y[0], expected);
    }
    auto y = run_one_op({.op_type = "ConvInteger", .inputs = {x}, .constants = {{1, w}}, .attrs = conv_attrs(c)});
    expect_equal(y[0], native::reference_conv_integer(x, w, nullptr, nullptr, reference_geometry(c)));
    // Constant weights with a constant zero point (widened at compile time), and with one fed at run time.
    for (int threads : {1, 3}) {
      auto widened = run_one_op({.op_type = "ConvInteger", .inputs = {x, x_zero_point}, .constants = {{1, w}, {3, w_zero_point}},
                                 .attrs = conv_attrs(c)}, threads);
      expect_equal(widened[0], expected);
      auto fed = run_one_op({.op_type = "ConvInteger", .inputs = {x, x_zero_point, w_zero_point}, .constants = {{1, w}},
                             .attrs = conv_attrs(c)}, threads);
      expect_equal(fed[0], expected);
    }
  }
}

TEST(ConvInteger, SignedInputAndUnsignedWeights) {
  // int8 X and uint8 W (shifted the other way on the u8 x s8 GEMM), W constant and fed, 1 and 3 threads.
  const ConvCase c{{2, 24, 15, 21}, {16, 24, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}, true};
  const Tensor x = random_integers(DType::kInt8, c.x, 70), w = random_integers(DType::kUInt8, c.w, 71);
  const Tensor x_zero_point = scalar_of(DType::kInt8, -9), w_zero_point = random_integers(DType::kUInt8, {c.w[0]}, 72);
  const Tensor expected = native::reference_conv_integer(x, w, &x_zero_point, &w_zero_point, reference_geometry(c));
  for (int threads : {1, 3}) {
    auto fed = run_one_op({.op_type = "ConvInteger", .inputs = {x, w, x_zero_point, w_zero_point}, .attrs = conv_attrs(c)}, threads);
    expect_equal(fed[0], expected);
    auto prepared = run_one_op({.op_type = "ConvInteger", .inputs = {x, x_zero_point}, .constants = {{1, w}, {3, w_zero_point}},
                                .attrs = conv_attrs(c)}, threads);
    expect_equal(prepared[0], expected);
  }
}

TEST(ConvInteger, AutoPadMatchesExplicitPads) {
  // 8 wide, kernel 3, stride 2: SAME needs 1 pad in total, at the end for SAME_UPPER, at the start for SAME_LOWER.
  const Tensor x = random_integers(DType::kUInt8, {1, 2, 8, 8}, 40), w = random_integers(DType::kUInt8, {3, 2, 3, 3}, 41);
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER"}) {
    AttributeMap attrs;
    attrs.set("auto_pad", Attribute::of_string(mode));
    attrs.set("strides", Attribute::of_ints({2, 2}));
    auto y = run_one_op({.op_type = "ConvInteger", .inputs = {x, w}, .attrs = attrs});
    const bool upper = std::string(mode) == "SAME_UPPER";
    const ReferenceConvGeometry g{1, {2, 2}, {1, 1}, {upper ? 0 : 1, upper ? 0 : 1}, {upper ? 1 : 0, upper ? 1 : 0}};
    expect_equal(y[0], native::reference_conv_integer(x, w, nullptr, nullptr, g));
  }
}

TEST(QLinearConv, MatchesReference) {
  uint32_t seed = 50;
  for (const ConvCase& c : kConvCases) {
    for (DType xt : {DType::kUInt8, DType::kInt8}) {
      SCOPED_TRACE(shape_to_string(c.x) + " * " + shape_to_string(c.w) + " " + dtype_name(xt));
      const Tensor x = random_integers(xt, c.x, ++seed), w = random_integers(DType::kInt8, c.w, ++seed);
      const Tensor x_scale = make_float({}, {0.05f}), y_scale = make_float({}, {0.7f});
      const Tensor w_scale = c.per_channel ? random_scales({c.w[0]}, ++seed, 0.002f, 0.02f) : make_float({}, {0.01f});
      const Tensor x_zero_point = scalar_of(xt, xt == DType::kUInt8 ? 100 : -4);
      const Tensor w_zero_point = scalar_of(DType::kInt8, 0);
      const Tensor y_zero_point = scalar_of(xt, xt == DType::kUInt8 ? 120 : 2);
      const Tensor bias = random_integers(DType::kInt32, {c.w[0]}, ++seed);
      const Tensor expected = native::reference_qlinear_conv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale,
                                                             y_zero_point, &bias, reference_geometry(c));
      for (int threads : {1, 3}) {
        auto y = run_one_op({.op_type = "QLinearConv",
                             .inputs = {x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, bias},
                             .attrs = conv_attrs(c)},
                            threads);
        expect_equal(y[0], expected);
      }
    }
  }
}

TEST(QLinearConv, ReferenceAgreesWithHandComputedValue) {
  // One 1x1 conv element: ((200 - 100) * (3 - 1) + 10) * (0.5 * 0.25 / 2) = 13.125 -> 13, + 5 = 18.
  Tensor x = random_integers(DType::kUInt8, {1, 1, 1, 1}, 0), w = random_integers(DType::kInt8, {1, 1, 1, 1}, 0);
  x.as<uint8_t>()[0] = 200;
  w.as<int8_t>()[0] = 3;
  Tensor bias(DType::kInt32, {1});
  bias.as<int32_t>()[0] = 10;
  auto y = run_one_op({.op_type = "QLinearConv",
                       .inputs = {x, make_float({}, {0.5f}), scalar_of(DType::kUInt8, 100), w, make_float({}, {0.25f}),
                                  scalar_of(DType::kInt8, 1), make_float({}, {2.0f}), scalar_of(DType::kUInt8, 5), bias}});
  EXPECT_EQ(y[0].as<uint8_t>()[0], 18);
}

}  // namespace
}  // namespace tessera
