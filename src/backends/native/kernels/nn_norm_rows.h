// LayerNormalization of one float32 row, written as plain loops and GCC/Clang
// vector-extension accumulators that the compiler keeps in registers.
// Included by nn_norm.cc (baseline ISA), nn_norm_avx2.cc and nn_norm_avx512.cc
// (their ISA flags) inside a namespace each names, so the same source is
// compiled for each ISA (chosen in nn_norm.cc). Pure: no allocation, no globals.
//
// The statistics are nn_norm.cc's moments_of for float: two passes, each summing
// terms of one size (deviations from the first value, then squares about the
// mean rounded to float) in 16-float lanes over blocks of kBlock values, the
// blocks' sums added in double; the variance corrected for the mean's rounding.
//
// Each file defines TESSERA_NORM_ROWS_NAMESPACE before including this.
#include <cmath>
#include <cstdint>

namespace tessera::native::TESSERA_NORM_ROWS_NAMESPACE {

#include "backends/native/kernels/float_lanes.inc"

/// Sum over p[0, n) of (p[i] - c), or of (p[i] - c)^2 when `square`: 16-float lanes, two chains, blocks of
/// 512 values (at most 16 terms a lane a block) added in double.
template <bool square>
inline double blocked_deviation_sum(const float* p, int64_t n, float c) {
  constexpr int64_t kBlock = 512;
  double sum = 0;
  int64_t i = 0;
  while (i + 32 <= n) {
    Lanes a = {}, b = {};
    const int64_t end = i + kBlock < n - n % 32 ? i + kBlock : n - n % 32;
    for (; i < end; i += 32) {
      const Lanes u = load_lanes(p + i) - c, v = load_lanes(p + i + 16) - c;
      if constexpr (square) {
        a += u * u;
        b += v * v;
      } else {
        a += u;
        b += v;
      }
    }
    const Lanes t = a + b;
    for (int l = 0; l < 16; ++l) sum += t[l];
  }
  for (; i < n; ++i) {
    const float d = p[i] - c;
    sum += square ? d * d : d;
  }
  return sum;
}

/// q = (p - mean) / sqrt(variance + epsilon) * gamma + beta over one row of n; the row's mean and
/// 1 / std, rounded to float, into *mean_out and *inv_std_out.
inline void layer_norm_row(const float* p, float* q, int64_t n, double epsilon, const float* gamma, const float* beta,
                           float* mean_out, float* inv_std_out) {
  const float pivot = n > 0 ? p[0] : 0.0f;
  const double mean = static_cast<double>(pivot) + blocked_deviation_sum<false>(p, n, pivot) / static_cast<double>(n);
  const float m = static_cast<float>(mean);
  const double shift_d = mean - static_cast<double>(m);
  double variance = blocked_deviation_sum<true>(p, n, m) / static_cast<double>(n) - shift_d * shift_d;
  if (variance < 0) variance = 0;  // rounding; NaN (a NaN or infinite value) stays NaN
  const double inv_std = 1.0 / std::sqrt(variance + epsilon);
  const float s = static_cast<float>(inv_std);
  // x - mean as (x - m) - (mean - m): x - m is exact near the mean, and the rounding of the mean to float
  // comes off as one constant a row.
  const float shift = static_cast<float>(shift_d * inv_std);
  for (int64_t i = 0; i < n; ++i) q[i] = ((p[i] - m) * s - shift) * gamma[i] + beta[i];
  *mean_out = m;
  *inv_std_out = s;
}

}  // namespace tessera::native::TESSERA_NORM_ROWS_NAMESPACE
