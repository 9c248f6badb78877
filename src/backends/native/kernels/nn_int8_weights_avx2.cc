// The int8-weight row kernel for AVX2 + FMA (flags from the file name; see
// CMakeLists.txt), chosen at run time in nn_int8_weights.cc. Intrinsics: GCC
// turned the portable body's int8-to-float conversion into scalar code. Each
// panel row's 16 bytes widen once (vpmovsxbd, vcvtdq2ps) for every row of x;
// one row of x splits K over four chains of accumulators.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "backends/native/kernels/nn_int8_weights.h"

namespace tessera::native {
namespace {

template <int kRows>
void panel_rows(int64_t k, const float* x, int64_t lda, const int8_t* panel, const float* scales, const float* bias,
                float lo, float hi, int64_t cols, float* y, int64_t ldc) {
  constexpr int kChains = kRows == 1 ? 4 : kRows == 2 ? 2 : 1;
  __m256 acc[kChains][kRows][2];
#pragma GCC unroll 4
  for (int c = 0; c < kChains; ++c)
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) acc[c][r][0] = acc[c][r][1] = _mm256_setzero_ps();
  int64_t p = 0;
  for (; p + kChains <= k; p += kChains) {
#pragma GCC unroll 4
    for (int c = 0; c < kChains; ++c) {
      const int8_t* w = panel + (p + c) * 16;
      const __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w))));
      const __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + 8))));
#pragma GCC unroll 4
      for (int r = 0; r < kRows; ++r) {
        const __m256 xv = _mm256_broadcast_ss(x + r * lda + p + c);
        acc[c][r][0] = _mm256_fmadd_ps(xv, w0, acc[c][r][0]);
        acc[c][r][1] = _mm256_fmadd_ps(xv, w1, acc[c][r][1]);
      }
    }
  }
  for (; p < k; ++p) {
    const int8_t* w = panel + p * 16;
    const __m256 w0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w))));
    const __m256 w1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + 8))));
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __m256 xv = _mm256_broadcast_ss(x + r * lda + p);
      acc[0][r][0] = _mm256_fmadd_ps(xv, w0, acc[0][r][0]);
      acc[0][r][1] = _mm256_fmadd_ps(xv, w1, acc[0][r][1]);
    }
  }
  const __m256 low = _mm256_set1_ps(lo), high = _mm256_set1_ps(hi);
  // The panel's scales and bias, zero past its columns, once for every row.
  float s[16] = {}, b[16] = {};
  for (int64_t j = 0; j < cols; ++j) {
    s[j] = scales[j];
    if (bias) b[j] = bias[j];
  }
  const __m256 scale[2] = {_mm256_loadu_ps(s), _mm256_loadu_ps(s + 8)};
  const __m256 shift[2] = {_mm256_loadu_ps(b), _mm256_loadu_ps(b + 8)};
  // Constant indices only (unrolled), so that the accumulators stay in registers in the loop above.
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
    __m256 v[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256 sum = acc[0][r][h];
#pragma GCC unroll 4
      for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c][r][h]);
      v[h] = _mm256_fmadd_ps(sum, scale[h], shift[h]);
      // The value as the second operand: a NaN passes max and min.
      v[h] = _mm256_min_ps(high, _mm256_max_ps(low, v[h]));
    }
    float* out = y + r * ldc;
    if (cols == 16) {
      _mm256_storeu_ps(out, v[0]);
      _mm256_storeu_ps(out + 8, v[1]);
    } else {
      float tile[16];
      _mm256_storeu_ps(tile, v[0]);
      _mm256_storeu_ps(tile + 8, v[1]);
      for (int64_t j = 0; j < cols; ++j) out[j] = tile[j];
    }
  }
}

struct Avx2Panel {
  template <int kRows>
  static void run(int64_t k, const float* x, int64_t lda, const int8_t* panel, const float* scales, const float* bias,
                  float lo, float hi, int64_t cols, float* y, int64_t ldc) {
    panel_rows<kRows>(k, x, lda, panel, scales, bias, lo, hi, cols, y, ldc);
  }
};

#include "backends/native/kernels/nn_int8_weights_body.h"

}  // namespace

void int8_weight_rows_avx2(const Int8Weights& w, int64_t rows, const float* x, int64_t lda, float* y, int64_t ldc,
                           const float* bias, float lo, float hi, int64_t panel_begin, int64_t panel_end) {
  int8_rows_driver<Avx2Panel>(w, rows, x, lda, y, ldc, bias, lo, hi, panel_begin, panel_end);
}

}  // namespace tessera::native
