// Float32 exp, sigmoid, tanh and erf over contiguous spans, written as
// branch-free scalar code that the compiler vectorises (libm's calls stop
// vectorisation). Included once per ISA: by elementwise_math.cc (baseline
// flags) and elementwise_avx512.cc (AVX-512 flags), each defining
// TESSERA_ELEMENTWISE_MATH_NAMESPACE; elementwise_math_dispatch picks one from
// the CPU's features. Accuracy: a few float ulps (tested against libm in
// tests/unit/elementwise_test.cc).
#ifndef TESSERA_ELEMENTWISE_MATH_NAMESPACE
#error "define TESSERA_ELEMENTWISE_MATH_NAMESPACE before including elementwise_math.h"
#endif
#include <cstdint>
#include <cstring>
#include <limits>

namespace tessera::native::elementwise::TESSERA_ELEMENTWISE_MATH_NAMESPACE {
namespace {

#include "backends/native/kernels/exp_polynomial.inc"

/// e^x with libm's saturation: +inf above ~88.72, 0 below ~-87.34, NaN kept.
inline float exp_one(float x) {
  const float clamped = x > 88.3762626647949f ? 88.3762626647949f : (x < -87.3365447505531f ? -87.3365447505531f : x);
  const float result = exp_of_clamped(clamped);
  // Selects, not branches, so the loop stays vectorisable.
  float out = x > 88.7228391f ? std::numeric_limits<float>::infinity() : result;
  out = x < -87.3365447505531f ? 0.0f : out;
  return x != x ? x : out;
}

inline float sigmoid_one(float x) { return 1.0f / (1.0f + exp_one(-x)); }

/// tanh(x) = sign(x) * (1 - 2 / (e^{2|x|} + 1)); below |x| = 0.0625 that
/// cancels, so an odd Taylor polynomial takes over there.
inline float tanh_one(float x) {
  const float a = x < 0 ? -x : x;
  const float e = exp_one(2.0f * (a > 9.0f ? 9.0f : a));
  const float large = 1.0f - 2.0f / (e + 1.0f);
  const float a2 = a * a;
  const float small = a + a * a2 * (-0.333333333f + a2 * (0.133333333f + a2 * -0.0539682540f));
  // Beyond 9, tanh rounds to 1 in float.
  const float magnitude = a < 0.0625f ? small : (a > 9.0f ? 1.0f : large);
  const float result = x < 0 ? -magnitude : magnitude;
  return x != x ? x : result;
}

/// erf: Taylor series below |x| = 0.5 (relative accuracy near 0), Abramowitz &
/// Stegun 7.1.26 above (absolute error 1.5e-7, relative below 3e-7 there).
inline float erf_one(float x) {
  const float a = x < 0 ? -x : x;
  const float a2 = a * a;
  const float small =
      1.12837916709551f * a *
      (1.0f + a2 * (-0.333333333f + a2 * (0.1f + a2 * (-0.0238095238f + a2 * (0.00462962963f + a2 * -0.000757575758f)))));
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
  const float large = 1.0f - poly * exp_one(-a2);
  const float magnitude = a < 0.5f ? small : large;
  const float result = x < 0 ? -magnitude : magnitude;
  return x != x ? x : result;
}

}  // namespace

void exp_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_one(x[i]);
}
void sigmoid_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = sigmoid_one(x[i]);
}
void tanh_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = tanh_one(x[i]);
}
void erf_span(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = erf_one(x[i]);
}

}  // namespace tessera::native::elementwise::TESSERA_ELEMENTWISE_MATH_NAMESPACE
