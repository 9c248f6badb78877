// AVX-512 GEMM microkernel: a 12 x 32 tile of C held in 24 zmm accumulators;
// per depth step two B vectors are loaded and each A value is broadcast.
// Partial tiles use masked loads/stores. Compiled with AVX-512 flags only.
#include <immintrin.h>

#include "backends/native/kernels/nn_internal.h"

namespace tessera::native {
namespace {

constexpr int kMr = 12;
constexpr int kNr = 32;

void microkernel(int64_t k, const float* a, const float* b, float* c, int64_t ldc, int64_t m, int64_t n,
                 bool accumulate, const float* row_bias, const GemmClamp* clamp) {
  __m512 acc0[kMr], acc1[kMr];
#pragma GCC unroll 12
  for (int i = 0; i < kMr; ++i) {
    acc0[i] = _mm512_setzero_ps();
    acc1[i] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    const __m512 b0 = _mm512_loadu_ps(b);
    const __m512 b1 = _mm512_loadu_ps(b + 16);
    _mm_prefetch(reinterpret_cast<const char*>(b + 8 * kNr), _MM_HINT_T0);
#pragma GCC unroll 12
    for (int i = 0; i < kMr; ++i) {
      const __m512 av = _mm512_set1_ps(a[i]);
      acc0[i] = _mm512_fmadd_ps(av, b0, acc0[i]);
      acc1[i] = _mm512_fmadd_ps(av, b1, acc1[i]);
    }
    a += kMr;
    b += kNr;
  }
  const __mmask16 mask0 = n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
  const __mmask16 mask1 = n >= 32 ? __mmask16(0xFFFF) : n <= 16 ? __mmask16(0) : __mmask16((1u << (n - 16)) - 1);
#pragma GCC unroll 12
  for (int i = 0; i < kMr; ++i) {
    if (i >= m) break;
    float* row = c + i * ldc;
    __m512 r0 = acc0[i], r1 = acc1[i];
    if (row_bias) {
      const __m512 bias = _mm512_set1_ps(row_bias[i]);
      r0 = _mm512_add_ps(r0, bias);
      r1 = _mm512_add_ps(r1, bias);
    }
    if (accumulate) {
      r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(mask0, row));
      r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(mask1, row + 16));
    }
    if (clamp) {
      const __m512 lo = _mm512_set1_ps(clamp->lo), hi = _mm512_set1_ps(clamp->hi);
      r0 = _mm512_min_ps(hi, _mm512_max_ps(lo, r0));  // NaN in r0 propagates
      r1 = _mm512_min_ps(hi, _mm512_max_ps(lo, r1));  // NaN in r1 propagates
    }
    _mm512_mask_storeu_ps(row, mask0, r0);
    _mm512_mask_storeu_ps(row + 16, mask1, r1);
  }
}

}  // namespace

const GemmMicrokernel& gemm_microkernel_avx512() {
  static const GemmMicrokernel kernel{"avx512", kMr, kNr, microkernel};
  return kernel;
}

}  // namespace tessera::native
