// Element-wise ops: the broadcast planner against per-element index
// arithmetic, the vectorised float32 math against libm, and the ops' ONNX
// semantics (integer division and modulo, Pow types, Clip forms, Cast, Where,
// variadic ops, Dropout) against hand-computed values.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "backends/native/kernels/elementwise_internal.h"
#include "ir/error.h"
#include "ir/shape_util.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

using native::ThreadPool;
namespace ew = native::elementwise;

template <typename T>
Tensor make_tensor(DType dtype, Shape shape, std::vector<T> values) {
  Tensor t(dtype, std::move(shape));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  for (size_t i = 0; i < values.size(); ++i) t.as<T>()[i] = values[i];
  return t;
}

template <typename T>
std::vector<T> values_of(const Tensor& t) {
  return std::vector<T>(t.as<T>(), t.as<T>() + t.numel());
}

Tensor make_bool(Shape shape, std::vector<bool> values) {
  Tensor t(DType::kBool, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.as<bool>()[i] = values[i];
  return t;
}

// --- Broadcast planner -------------------------------------------------------

TEST(ElementwiseBroadcast, MatchesReferenceOnManyShapes) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {}},        {{}, {2, 3, 4}},        {{2, 3, 4}, {4}},
      {{2, 3, 4}, {3, 1}},    {{1, 3, 1, 5}, {2, 1, 4, 1}}, {{8, 16, 5, 5}, {16, 1, 1}}, {{3, 1}, {1, 4}},
      {{2, 1, 3, 1, 2}, {1, 4, 1, 5, 1}}, {{0, 3}, {3}}, {{1}, {1, 1, 1}}, {{5, 1, 7}, {5, 6, 1}}};
  ThreadPool pool(3);
  for (const auto& [sa, sb] : cases) {
    Tensor a = random_float(sa, 1), b = random_float(sb, 2);
    Shape out_shape = broadcast_shapes(sa, sb);
    Tensor fast(DType::kFloat32, out_shape), reference(DType::kFloat32, out_shape);
    auto op = [](float x, float y) { return x * 3.0f - y; };
    ew::broadcast_binary<float, float, float>(pool, a.view(), b.view(), fast.view(), op);
    ew::broadcast_binary_reference<float, float, float>(a.view(), b.view(), reference.view(), op);
    SCOPED_TRACE(shape_to_string(sa) + " vs " + shape_to_string(sb));
    expect_close(fast, reference, 0, 0);
  }
}

TEST(ElementwiseBroadcast, LargeTensorsSplitAcrossThreadsMatchReference) {
  // Chunks start mid-row here (rows of 1000 elements, chunks of 16384).
  ThreadPool pool(4);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{3, 64, 1000}, {64, 1}}, {{3, 64, 1000}, {1000}}, {{200000}, {1}}, {{4, 1, 1000}, {1, 50, 1}}};
  for (const auto& [sa, sb] : cases) {
    Tensor a = random_float(sa, 3), b = random_float(sb, 4);
    Shape out_shape = broadcast_shapes(sa, sb);
    Tensor fast(DType::kFloat32, out_shape), reference(DType::kFloat32, out_shape);
    auto op = [](float x, float y) { return x + 2.0f * y; };
    ew::broadcast_binary<float, float, float>(pool, a.view(), b.view(), fast.view(), op);
    ew::broadcast_binary_reference<float, float, float>(a.view(), b.view(), reference.view(), op);
    expect_close(fast, reference, 0, 0);
  }
}

TEST(ElementwiseBroadcast, MergesDimsWithTheSameBroadcastPattern) {
  // NCHW + per-channel bias: rows of H*W with the bias fixed per row.
  const Shape x{2, 8, 5, 5}, bias{8, 1, 1};
  const Shape* shapes[] = {&x, &bias};
  ew::BroadcastPlan plan = ew::plan_broadcast(shapes, 2, {2, 8, 5, 5});
  EXPECT_EQ(plan.inner, 25);
  EXPECT_EQ(plan.inner_steps.to_vector(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(plan.outer_dims.to_vector(), (Shape{2, 8}));
  EXPECT_EQ(plan.outer_stride(1, 0), 0);
  EXPECT_EQ(plan.outer_stride(1, 1), 1);
  EXPECT_EQ(plan.outer_stride(0, 0), 200);
  EXPECT_EQ(plan.outer_stride(0, 1), 25);
}

// --- Vectorised float32 math -------------------------------------------------

void check_span_against_libm(ew::Float32MathSpans::Span span, double (*exact)(double), const char* name, double rtol,
                             double atol) {
  std::vector<float> x;
  for (float v = -30.0f; v <= 30.0f; v += 0.01171875f) x.push_back(v);
  for (float v : {0.0f, -0.0f, 1e-6f, -1e-6f, 1e-3f, 0.0624f, 0.0626f, 0.4999f, 0.5001f, 88.0f, -87.0f, 100.0f,
                  -100.0f})
    x.push_back(v);
  std::vector<float> y(x.size());
  span(x.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = exact(x[i]);
    if (std::isinf(want) || want > 3e38) {
      EXPECT_GT(y[i], 3e38f) << name << "(" << x[i] << ")";
      continue;
    }
    EXPECT_LE(std::fabs(y[i] - want), atol + rtol * std::fabs(want)) << name << "(" << x[i] << ") = " << y[i] << ", want " << want;
  }
  const float special[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity()};
  float out[3];
  span(special, out, 3);
  EXPECT_TRUE(std::isnan(out[0])) << name << "(NaN)";
  EXPECT_EQ(out[1], static_cast<float>(exact(special[1]))) << name << "(inf)";
  EXPECT_EQ(out[2], static_cast<float>(exact(special[2]))) << name << "(-inf)";
}

double exact_exp(double x) { return std::exp(x); }
double exact_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double exact_tanh(double x) { return std::tanh(x); }
double exact_erf(double x) { return std::erf(x); }

void check_math_set(const ew::Float32MathSpans& spans) {
  // Results below float's normal range flush to 0.
  check_span_against_libm(spans.exp, exact_exp, "exp", 2e-6, 1.2e-38);
  check_span_against_libm(spans.sigmoid, exact_sigmoid, "sigmoid", 2e-6, 1e-30);
  check_span_against_libm(spans.tanh, exact_tanh, "tanh", 2e-6, 0);
  check_span_against_libm(spans.erf, exact_erf, "erf", 2e-6, 0);
}

TEST(ElementwiseMath, BaselineSpansMatchLibm) { check_math_set(ew::float32_math_baseline()); }

TEST(ElementwiseMath, Avx2SpansMatchLibmAndAreChosenBelowAvx512) {
  // Every CPU this project has met has AVX2; one without it must never be handed these spans.
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const char* cap = std::getenv("TESSERA_ISA");
  const bool capped = cap && std::string(cap) == "baseline";
  if (avx2) check_math_set(ew::float32_math_avx2());
  // (TESSERA_ISA=avx512 keeps AVX-512, without VNNI.)
  const bool below_avx512 = cap && (std::string(cap) == "baseline" || std::string(cap) == "avx2");
  if (!__builtin_cpu_supports("avx512f") || below_avx512) {
    EXPECT_EQ(&ew::float32_math(), avx2 && !capped ? &ew::float32_math_avx2() : &ew::float32_math_baseline());
  }
}

TEST(ElementwiseMath, Avx512SpansMatchLibm) {
  if (!__builtin_cpu_supports("avx512f")) GTEST_SKIP() << "no AVX-512F";
  check_math_set(ew::float32_math_avx512());
}

TEST(ElementwiseMath, Float32KernelsAgreeWithFloat64Kernels) {
  // The float32 path uses the vectorised spans, float64 the libm reference.
  for (const char* op : {"Exp", "Sigmoid", "Tanh", "Erf"}) {
    Tensor x = random_float({3, 1000}, 7);
    for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] *= 8.0f;
    Tensor x64(DType::kFloat64, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) x64.as<double>()[i] = x.as<float>()[i];
    Tensor y32 = run_one_op({.op_type = op, .inputs = {x}}, 2)[0];
    Tensor y64 = run_one_op({.op_type = op, .inputs = {x64}})[0];
    for (int64_t i = 0; i < x.numel(); ++i) {
      ASSERT_NEAR(y32.as<float>()[i], y64.as<double>()[i], 1e-6 + 2e-6 * std::fabs(y64.as<double>()[i])) << op << " at " << i;
    }
  }
}

// --- Op semantics --------------------------------------------------------------

TEST(ElementwiseOps, IntegerDivisionTruncatesAndNeverTraps) {
  Tensor a = make_tensor<int32_t>(DType::kInt32, {5}, {7, -7, 7, 5, std::numeric_limits<int32_t>::min()});
  Tensor b = make_tensor<int32_t>(DType::kInt32, {5}, {2, 2, -2, 0, -1});
  Tensor y = run_one_op({.op_type = "Div", .inputs = {a, b}})[0];
  EXPECT_EQ(values_of<int32_t>(y), (std::vector<int32_t>{3, -3, -3, 0, std::numeric_limits<int32_t>::min()}));
}

TEST(ElementwiseOps, ModFollowsDivisorSignUnlessFmod) {
  Tensor a = make_tensor<int64_t>(DType::kInt64, {4}, {-4, 7, -3, 5});
  Tensor b = make_tensor<int64_t>(DType::kInt64, {4}, {3, -3, -2, 0});
  Tensor floored = run_one_op({.op_type = "Mod", .inputs = {a, b}})[0];
  EXPECT_EQ(values_of<int64_t>(floored), (std::vector<int64_t>{2, -2, -1, 0}));
  OneOpGraph spec{.op_type = "Mod", .inputs = {a, b}};
  spec.attrs.set("fmod", Attribute::of_int(1));
  EXPECT_EQ(values_of<int64_t>(run_one_op(spec)[0]), (std::vector<int64_t>{-1, 1, -1, 0}));
  Tensor fa = make_float({2}, {-4.5f, 7.5f}), fb = make_float({2}, {2.0f, -2.0f});
  OneOpGraph float_spec{.op_type = "Mod", .inputs = {fa, fb}};
  float_spec.attrs.set("fmod", Attribute::of_int(1));
  expect_close(run_one_op(float_spec)[0], make_float({2}, {-0.5f, 1.5f}));
}

TEST(ElementwiseOps, PowKeepsTheBaseDtype) {
  Tensor base = make_tensor<int64_t>(DType::kInt64, {3}, {3, -2, 10});
  Tensor exponent = make_tensor<int64_t>(DType::kInt64, {3}, {39, 3, -1});
  EXPECT_EQ(values_of<int64_t>(run_one_op({.op_type = "Pow", .inputs = {base, exponent}})[0]),
            (std::vector<int64_t>{4052555153018976267LL, -8, 0}));
  Tensor float_exponent = make_float({3}, {2.0f, 3.0f, 0.5f});
  Tensor int_base = make_tensor<int32_t>(DType::kInt32, {3}, {4, 2, 9});
  EXPECT_EQ(values_of<int32_t>(run_one_op({.op_type = "Pow", .inputs = {int_base, float_exponent}})[0]),
            (std::vector<int32_t>{16, 8, 3}));
  // An integer base to a float power whose result is NaN or out of range: Cast's rule (NaN gives 0,
  // out of range saturates), never undefined behaviour (a fuzzer finding under UBSan).
  Tensor odd_base = make_tensor<int32_t>(DType::kInt32, {4}, {-2, 2, -2, 4});
  Tensor odd_exponent = make_float({4}, {0.5f, 100.0f, 101.0f, -1.0f});
  EXPECT_EQ(values_of<int32_t>(run_one_op({.op_type = "Pow", .inputs = {odd_base, odd_exponent}})[0]),
            (std::vector<int32_t>{0, std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::lowest(), 0}));
  // Scalar exponents take the fast paths; compare them with pow itself.
  Tensor x = random_float({100}, 5);
  for (float e : {2.0f, 3.0f, 0.5f, 1.0f, 1.7f}) {
    Tensor y = run_one_op({.op_type = "Pow", .inputs = {x, make_float({}, {e})}})[0];
    for (int64_t i = 0; i < 100; ++i) {
      float want = std::pow(x.as<float>()[i], e);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(y.as<float>()[i]));
      } else {
        // Relative: x^3 of a small x is far below an absolute 1e-6.
        EXPECT_NEAR(y.as<float>()[i], want, 1e-6 * std::fabs(want) + 1e-30) << "exponent " << e << ", x " << x.as<float>()[i];
      }
    }
  }
}

TEST(ElementwiseOps, ClipLegacyAttributesAndOptionalInputs) {
  Tensor x = make_float({5}, {-3, -1, 0, 1, 3});
  OneOpGraph legacy{.op_type = "Clip", .opset = 6, .inputs = {x}};
  legacy.attrs.set("min", Attribute::of_float(-2));
  legacy.attrs.set("max", Attribute::of_float(2));
  expect_close(run_one_op(legacy)[0], make_float({5}, {-2, -1, 0, 1, 2}));
  // Opset 11+: min only (max omitted).
  OneOpGraph min_only{.op_type = "Clip", .inputs = {x}};
  min_only.constants = {{1, make_float({}, {-0.5f})}};
  expect_close(run_one_op(min_only)[0], make_float({5}, {-0.5f, -0.5f, 0, 1, 3}));
  Tensor xi = make_tensor<int8_t>(DType::kInt8, {4}, {-100, -5, 5, 100});
  OneOpGraph ints{.op_type = "Clip", .inputs = {xi}};
  ints.constants = {{1, make_tensor<int8_t>(DType::kInt8, {}, {-10})}, {2, make_tensor<int8_t>(DType::kInt8, {}, {10})}};
  EXPECT_EQ(values_of<int8_t>(run_one_op(ints)[0]), (std::vector<int8_t>{-10, -5, 5, 10}));
}

TEST(ElementwiseOps, WhereBroadcastsThreeWays) {
  Tensor condition = make_bool({2, 1}, {true, false});
  Tensor x = make_float({1, 3}, {1, 2, 3});
  Tensor y = make_float({}, {-1});
  expect_close(run_one_op({.op_type = "Where", .inputs = {condition, x, y}})[0],
               make_float({2, 3}, {1, 2, 3, -1, -1, -1}));
}

TEST(ElementwiseOps, VariadicOpsBroadcastAllInputs) {
  Tensor a = make_float({3}, {1, 5, 3}), b = make_float({2, 1}, {2, 4}), c = make_float({}, {0});
  expect_close(run_one_op({.op_type = "Max", .inputs = {a, b, c}})[0], make_float({2, 3}, {2, 5, 3, 4, 5, 4}));
  expect_close(run_one_op({.op_type = "Sum", .inputs = {a, b, c}})[0], make_float({2, 3}, {3, 7, 5, 5, 9, 7}));
  expect_close(run_one_op({.op_type = "Mean", .inputs = {a, b}})[0], make_float({2, 3}, {1.5, 3.5, 2.5, 2.5, 4.5, 3.5}));
  expect_close(run_one_op({.op_type = "Min", .inputs = {a}})[0], a);
}

TEST(ElementwiseOps, CastConvertsBetweenAllKinds) {
  Tensor x = make_float({5}, {1.5f, -2.7f, 0.0f, 65504.0f, 1e-8f});
  OneOpGraph to_half{.op_type = "Cast", .inputs = {x}};
  to_half.attrs.set("to", Attribute::of_int(10));
  Tensor half = run_one_op(to_half)[0];
  ASSERT_EQ(half.dtype(), DType::kFloat16);
  OneOpGraph back{.op_type = "Cast", .inputs = {half}};
  back.attrs.set("to", Attribute::of_int(1));
  expect_close(run_one_op(back)[0], make_float({5}, {1.5f, -2.69921875f, 0.0f, 65504.0f, 0.0f}), 1e-7, 0);
  OneOpGraph to_int{.op_type = "Cast", .inputs = {x}};
  to_int.attrs.set("to", Attribute::of_int(6));
  EXPECT_EQ(values_of<int32_t>(run_one_op(to_int)[0]), (std::vector<int32_t>{1, -2, 0, 65504, 0}));
  OneOpGraph to_bool{.op_type = "Cast", .inputs = {x}};
  to_bool.attrs.set("to", Attribute::of_int(9));
  Tensor flags = run_one_op(to_bool)[0];
  EXPECT_EQ(values_of<bool>(flags), (std::vector<bool>{true, true, false, true, true}));
}

Tensor make_strings(Shape shape, std::vector<std::string> values) {
  Tensor t(DType::kString, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.as<std::string>()[i] = values[i];
  return t;
}

std::vector<std::string> strings_of(const Tensor& t) {
  EXPECT_EQ(t.dtype(), DType::kString);
  return std::vector<std::string>(t.as<std::string>(), t.as<std::string>() + t.numel());
}

TEST(ElementwiseOps, CastToAndFromStrings) {
  // Shortest text that reads back to the same float32 (what numpy's str() of a float32 prints), ONNX's
  // reserved literals for the special values.
  Tensor x = make_float({7}, {1.5f, -2.7f, 0.0f, 65504.0f, 1e-8f, std::numeric_limits<float>::infinity(), NAN});
  OneOpGraph to_string{.op_type = "Cast", .inputs = {x}};
  to_string.attrs.set("to", Attribute::of_int(8));
  Tensor text = run_one_op(to_string)[0];
  EXPECT_EQ(strings_of(text), (std::vector<std::string>{"1.5", "-2.7", "0", "65504", "1e-08", "INF", "NaN"}));
  OneOpGraph back{.op_type = "Cast", .inputs = {text}};
  back.attrs.set("to", Attribute::of_int(1));
  Tensor round_trip = run_one_op(back)[0];
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(round_trip.as<float>()[i], x.as<float>()[i]) << i;
  EXPECT_TRUE(std::isnan(round_trip.as<float>()[6]));
  // Reading: signs, scientific notation, the literals in any case; integers exactly, other text truncated.
  Tensor words = make_strings({6}, {"+3", "-1E2", "inf", "-INF", "nAn", "100.5"});
  OneOpGraph to_double{.op_type = "Cast", .inputs = {words}};
  to_double.attrs.set("to", Attribute::of_int(11));
  Tensor d = run_one_op(to_double)[0];
  EXPECT_EQ(d.as<double>()[0], 3.0);
  EXPECT_EQ(d.as<double>()[1], -100.0);
  EXPECT_EQ(d.as<double>()[2], std::numeric_limits<double>::infinity());
  EXPECT_EQ(d.as<double>()[3], -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(d.as<double>()[4]));
  EXPECT_EQ(d.as<double>()[5], 100.5);
  OneOpGraph to_int{.op_type = "Cast", .inputs = {make_strings({3}, {"9007199254740993", "100.5", "-7"})}};
  to_int.attrs.set("to", Attribute::of_int(7));
  EXPECT_EQ(values_of<int64_t>(run_one_op(to_int)[0]), (std::vector<int64_t>{9007199254740993, 100, -7}));
  OneOpGraph bad{.op_type = "Cast", .inputs = {make_strings({2}, {"1", "one"})}};
  bad.attrs.set("to", Attribute::of_int(1));
  EXPECT_USER_ERROR(run_one_op(bad), "node 'Cast_0' (Cast): element 1 is the string \"one\", which is not a number");
  // Ops that do not declare strings refuse them, naming the node.
  EXPECT_UNSUPPORTED_ERROR(run_one_op({.op_type = "Relu", .inputs = {words}}), "Relu_0");
}

TEST(ElementwiseOps, RoundHalfToEvenAndSign) {
  Tensor x = make_float({6}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f});
  expect_close(run_one_op({.op_type = "Round", .inputs = {x}})[0], make_float({6}, {0, 2, 2, -0, -2, 2}));
  expect_close(run_one_op({.op_type = "Sign", .inputs = {x}})[0], make_float({6}, {1, 1, 1, -1, -1, 1}));
}

TEST(ElementwiseOps, PReluSlopePerChannel) {
  Tensor x = make_float({1, 2, 2}, {-1, 2, -3, 4});
  Tensor slope = make_float({2, 1}, {0.5f, 0.25f});
  expect_close(run_one_op({.op_type = "PRelu", .inputs = {x, slope}})[0], make_float({1, 2, 2}, {-0.5f, 2, -0.75f, 4}));
}

TEST(ElementwiseOps, ComparisonsAndLogicGiveBool) {
  Tensor a = make_tensor<int64_t>(DType::kInt64, {3}, {1, 2, 3});
  Tensor b = make_tensor<int64_t>(DType::kInt64, {}, {2});
  EXPECT_EQ(values_of<bool>(run_one_op({.op_type = "Less", .inputs = {a, b}})[0]), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(values_of<bool>(run_one_op({.op_type = "GreaterOrEqual", .inputs = {a, b}})[0]),
            (std::vector<bool>{false, true, true}));
  Tensor p = make_bool({2}, {true, false}), q = make_bool({2, 1}, {true, false});
  EXPECT_EQ(values_of<bool>(run_one_op({.op_type = "Xor", .inputs = {p, q}})[0]),
            (std::vector<bool>{false, true, true, false}));
}

TEST(ElementwiseOps, BitShiftDropsBitsShiftedOut) {
  Tensor x = make_tensor<uint8_t>(DType::kUInt8, {3}, {1, 0x81, 0xff});
  Tensor s = make_tensor<uint8_t>(DType::kUInt8, {3}, {7, 1, 9});
  OneOpGraph left{.op_type = "BitShift", .inputs = {x, s}};
  left.attrs.set("direction", Attribute::of_string("LEFT"));
  EXPECT_EQ(values_of<uint8_t>(run_one_op(left)[0]), (std::vector<uint8_t>{0x80, 0x02, 0}));
}

TEST(ElementwiseOps, DropoutInInferenceCopiesAndMasksAllTrue) {
  Tensor x = random_float({4, 5}, 9);
  auto out = run_one_op({.op_type = "Dropout", .inputs = {x}, .num_outputs = 2});
  expect_close(out[0], x, 0, 0);
  ASSERT_EQ(out[1].dtype(), DType::kBool);
  for (bool v : values_of<bool>(out[1])) EXPECT_TRUE(v);
}

TEST(ElementwiseOps, ActivationsMatchTheirFormulas) {
  Tensor x = random_float({257}, 11);
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] *= 4.0f;
  struct Case {
    const char* op;
    double (*formula)(double);
  };
  const Case cases[] = {
      {"Softplus", [](double v) { return std::log(std::exp(v) + 1); }},
      {"Softsign", [](double v) { return v / (1 + std::fabs(v)); }},
      {"Elu", [](double v) { return v < 0 ? std::exp(v) - 1 : v; }},
      {"HardSwish", [](double v) { return v * std::max(0.0, std::min(1.0, v / 6 + 0.5)); }},
      {"HardSigmoid", [](double v) { return std::max(0.0, std::min(1.0, 0.2 * v + 0.5)); }},
      {"LeakyRelu", [](double v) { return v < 0 ? 0.01 * v : v; }},
      {"Celu", [](double v) { return std::max(0.0, v) + std::min(0.0, std::exp(v) - 1); }},
  };
  for (const Case& c : cases) {
    Tensor y = run_one_op({.op_type = c.op, .inputs = {x}})[0];
    Tensor want(DType::kFloat32, x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) want.as<float>()[i] = static_cast<float>(c.formula(x.as<float>()[i]));
    SCOPED_TRACE(c.op);
    expect_close(y, want, 1e-6, 1e-5);
  }
}

TEST(ElementwiseOps, Float16ComputesThroughFloat) {
  Tensor a(DType::kFloat16, {3}), b(DType::kFloat16, {3});
  const float av[] = {1.5f, -2.0f, 3.25f}, bv[] = {0.5f, 4.0f, -1.0f};
  for (int i = 0; i < 3; ++i) {
    a.as<uint16_t>()[i] = float_to_half(av[i]);
    b.as<uint16_t>()[i] = float_to_half(bv[i]);
  }
  Tensor y = run_one_op({.op_type = "Max", .inputs = {a, b}})[0];
  ASSERT_EQ(y.dtype(), DType::kFloat16);
  EXPECT_EQ(half_to_float(y.as<uint16_t>()[0]), 1.5f);
  EXPECT_EQ(half_to_float(y.as<uint16_t>()[1]), 4.0f);
  EXPECT_EQ(half_to_float(y.as<uint16_t>()[2]), 3.25f);
}

TEST(ElementwiseErrors, IncompatibleShapesAreUserErrors) {
  EXPECT_USER_ERROR(run_one_op({.op_type = "Mul", .inputs = {random_float({2, 3}, 1), random_float({4}, 2)}}), "Mul_0");
  EXPECT_USER_ERROR(run_one_op({.op_type = "Add", .inputs = {random_float({2}, 1), make_int64({2}, {1, 2})}}), "Add_0");
}

}  // namespace
}  // namespace tessera::testing
