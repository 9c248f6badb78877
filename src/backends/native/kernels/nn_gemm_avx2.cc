// AVX2+FMA GEMM microkernel: a 6 x 16 tile of C held in 12 ymm accumulators.
// Partial tiles go through a small stack tile. Compiled with -mavx2 -mfma only.
#include <immintrin.h>

#define TESSERA_GEMM_ROWS_NAMESPACE avx2
#include "backends/native/kernels/nn_gemm_rows_body.h"
#include "backends/native/kernels/nn_internal.h"

namespace tessera::native {
namespace {

constexpr int kMr = 6;
constexpr int kNr = 16;
constexpr int kStreamAhead = 8192 / (kNr * 4);  // depth steps of B in 8 KB

/// kStream: B comes from memory (GemmMicrokernel::run_stream): also ask for it 8 KB ahead, into L2.
template <bool kStream>
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
    if constexpr (kStream) _mm_prefetch(reinterpret_cast<const char*>(b + kStreamAhead * kNr), _MM_HINT_T1);
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

/// GemmMicrokernel::run_row (the contract in nn_gemv_body.h): four rows of a panel at a time into four
/// pairs of accumulators, so that four rows' loads of B are in flight.
void row_kernel(int64_t kc, const float* x, int64_t x_stride, const float* panels, int64_t count, float* partial,
                bool first) {
  for (int64_t p = 0; p < count; ++p) {
    const float* r = panels + p * kc * kNr;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0, d1 = a0;
    int64_t kk = 0;
    for (; kk + 3 < kc; kk += 4, r += 4 * kNr) {
      const __m256 x0 = _mm256_broadcast_ss(x + kk * x_stride), x1 = _mm256_broadcast_ss(x + (kk + 1) * x_stride);
      const __m256 x2 = _mm256_broadcast_ss(x + (kk + 2) * x_stride), x3 = _mm256_broadcast_ss(x + (kk + 3) * x_stride);
      a0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(r), a0);
      a1 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(r + 8), a1);
      b0 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(r + 16), b0);
      b1 = _mm256_fmadd_ps(x1, _mm256_loadu_ps(r + 24), b1);
      c0 = _mm256_fmadd_ps(x2, _mm256_loadu_ps(r + 32), c0);
      c1 = _mm256_fmadd_ps(x2, _mm256_loadu_ps(r + 40), c1);
      d0 = _mm256_fmadd_ps(x3, _mm256_loadu_ps(r + 48), d0);
      d1 = _mm256_fmadd_ps(x3, _mm256_loadu_ps(r + 56), d1);
    }
    for (; kk < kc; ++kk, r += kNr) {
      const __m256 x0 = _mm256_broadcast_ss(x + kk * x_stride);
      a0 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(r), a0);
      a1 = _mm256_fmadd_ps(x0, _mm256_loadu_ps(r + 8), a1);
    }
    __m256 s0 = _mm256_add_ps(_mm256_add_ps(a0, b0), _mm256_add_ps(c0, d0));
    __m256 s1 = _mm256_add_ps(_mm256_add_ps(a1, b1), _mm256_add_ps(c1, d1));
    float* out = partial + p * kNr;
    if (!first) {
      s0 = _mm256_add_ps(s0, _mm256_loadu_ps(out));
      s1 = _mm256_add_ps(s1, _mm256_loadu_ps(out + 8));
    }
    _mm256_storeu_ps(out, s0);
    _mm256_storeu_ps(out + 8, s1);
  }
}

}  // namespace

const GemmMicrokernel& gemm_microkernel_avx2() {
  static const GemmMicrokernel kernel{"avx2", kMr, kNr, microkernel<false>, nullptr, row_kernel, microkernel<true>,
                                      avx2::gemm_rows};
  return kernel;
}

}  // namespace tessera::native
