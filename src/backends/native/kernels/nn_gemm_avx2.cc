// AVX2+FMA GEMM microkernel: a 6 x 16 tile of C held in 12 ymm accumulators.
// Partial tiles go through a small stack tile. Compiled with -mavx2 -mfma only.
#include <immintrin.h>

#include "backends/native/kernels/nn_internal.h"

namespace tessera::native {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;

void microkernel(int64_t k, const float* a, int64_t a_row_stride, const float* b, float* c, int64_t ldc, int64_t m,
                 int64_t n, bool accumulate, const float* row_bias, const GemmClamp* clamp) {
  // A packed (a[p*kMr + i]) or in place (a[i*a_row_stride + p]).
  const int64_t a_step = a_row_stride == 0 ? kMr : 1, a_row = a_row_stride == 0 ? 1 : a_row_stride;
  __m256 acc0[kMr], acc1[kMr];
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) {
    acc0[i] = _mm256_setzero_ps();
    acc1[i] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    const __m256 b0 = _mm256_loadu_ps(b);
    const __m256 b1 = _mm256_loadu_ps(b + 8);
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i * a_row);
      acc0[i] = _mm256_fmadd_ps(av, b0, acc0[i]);
      acc1[i] = _mm256_fmadd_ps(av, b1, acc1[i]);
    }
    a += a_step;
    b += kNr;
  }
  const bool full = n == kNr;
  alignas(32) float tile[kNr];
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) {
    if (i >= m) break;
    float* row = c + i * ldc;
    __m256 r0 = acc0[i], r1 = acc1[i];
    if (row_bias) {
      const __m256 bias = _mm256_set1_ps(row_bias[i]);
      r0 = _mm256_add_ps(r0, bias);
      r1 = _mm256_add_ps(r1, bias);
    }
    if (full) {
      if (accumulate) {
        r0 = _mm256_add_ps(r0, _mm256_loadu_ps(row));
        r1 = _mm256_add_ps(r1, _mm256_loadu_ps(row + 8));
      }
      if (clamp) {
        const __m256 lo = _mm256_set1_ps(clamp->lo), hi = _mm256_set1_ps(clamp->hi);
        r0 = _mm256_min_ps(hi, _mm256_max_ps(lo, r0));  // NaN in r0 propagates
        r1 = _mm256_min_ps(hi, _mm256_max_ps(lo, r1));  // NaN in r1 propagates
      }
      _mm256_storeu_ps(row, r0);
      _mm256_storeu_ps(row + 8, r1);
    } else {
      _mm256_store_ps(tile, r0);
      _mm256_store_ps(tile + 8, r1);
      for (int64_t j = 0; j < n; ++j) {
        const float v = tile[j] + (accumulate ? row[j] : 0.0f);
        row[j] = clamp ? (v < clamp->lo ? clamp->lo : (v > clamp->hi ? clamp->hi : v)) : v;
      }
    }
  }
}

}  // namespace

const GemmMicrokernel& gemm_microkernel_avx2() {
  static const GemmMicrokernel kernel{"avx2", kMr, kNr, microkernel};
  return kernel;
}

}  // namespace tessera::native
