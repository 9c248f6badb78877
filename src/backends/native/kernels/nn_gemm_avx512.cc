// AVX-512 GEMM microkernel: a 12 x 32 tile of C held in 24 zmm accumulators;
// per depth step two B vectors are loaded and each A value is broadcast, so
// 24 independent FMAs are in flight (FMA latency 4 x 2 ports needs 8) and 14
// loads feed 24 FMAs. A is read from a packed panel or, for full tiles of a
// row-major A, in place (no packing pass). The C tile is prefetched before the
// depth loop, so its cache misses overlap the FMAs. Edge tiles run a copy of
// the loop specialised to their rows and column vectors (a 1-row tail does 2
// FMAs a step, not 24) and store through masks. The same tiles also read B in
// place through a per-row offset table (run_offset_b, for the implicit-im2col
// convolution). run_stream, for B read once from memory, also prefetches B 8 KB
// ahead into L2. Compiled with AVX-512 flags only.
#include <immintrin.h>

#include <array>
#include <utility>

#define TESSERA_GEMM_ROWS_NAMESPACE avx512
#include "backends/native/kernels/nn_gemm_rows_body.h"
#include "backends/native/kernels/nn_internal.h"

namespace tessera::native {
namespace {

constexpr int kMr = 12;
constexpr int kNr = 32;
constexpr int kStreamAhead = 8192 / (kNr * 4);  // depth steps of B in 8 KB

/// Rows x (vectors x 16) tile: the depth loop, then bias, accumulate, clamp
/// and masked stores. A packed (kPacked) or in place with a_row_stride, as in
/// GemmMicrokernel::run; B a packed panel, or (kOffsetB) rows at b + b_offsets[p]
/// as in GemmMicrokernel::run_offset_b; kStream: B comes from memory (GemmMicrokernel::run_stream).
template <int kRows, int kVectors, bool kPacked, bool kOffsetB, bool kStream>
void tile_kernel(int64_t k, const float* a, int64_t a_row_stride, const float* b, const int64_t* b_offsets, float* c,
                 int64_t ldc, int64_t n, bool accumulate, const float* row_bias, const GemmClamp* clamp) {
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    if (kVectors == 2) _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
  }
  __m512 acc[kRows][kVectors];
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 2
    for (int v = 0; v < kVectors; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  // A(i, p) packed: a[p*kMr + i]; in place: a[i*a_row_stride + p], addressed
  // from four row pointers three rows apart plus one and two row strides, so
  // every row is a base + scaled index address (no spilled pointers).
  const float* r0 = a;
  const float* r3 = a + 3 * a_row_stride;
  const float* r6 = a + 6 * a_row_stride;
  const float* r9 = a + 9 * a_row_stride;
  const int64_t s1 = a_row_stride, s2 = 2 * a_row_stride;
  constexpr int64_t a_step = kPacked ? kMr : 1;
  for (int64_t p = 0; p < k; ++p) {
    __m512 bv[kVectors];
    const float* brow = kOffsetB ? b + b_offsets[p] : b;
#pragma GCC unroll 2
    for (int v = 0; v < kVectors; ++v) bv[v] = _mm512_loadu_ps(brow + 16 * v);
    if constexpr (!kOffsetB) {
      // B streams from L2: fetch 16 steps (2 KB) ahead, both of its cache lines.
      _mm_prefetch(reinterpret_cast<const char*>(b + 16 * kNr), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + 16 * kNr + 16), _MM_HINT_T0);
      if constexpr (kStream) {
        // B streams from memory (GemmMicrokernel::run_stream): also ask for it 8 KB ahead, into L2.
        _mm_prefetch(reinterpret_cast<const char*>(b + kStreamAhead * kNr), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(b + kStreamAhead * kNr + 16), _MM_HINT_T1);
      }
    }
#pragma GCC unroll 12
    for (int i = 0; i < kRows; ++i) {
      float value;
      if constexpr (kPacked) {
        value = r0[i];
      } else {
        const float* base = i < 3 ? r0 : i < 6 ? r3 : i < 9 ? r6 : r9;
        value = base[i % 3 == 0 ? 0 : i % 3 == 1 ? s1 : s2];
      }
      const __m512 av = _mm512_set1_ps(value);
#pragma GCC unroll 2
      for (int v = 0; v < kVectors; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
    r0 += a_step, r3 += a_step, r6 += a_step, r9 += a_step;
    if constexpr (!kOffsetB) b += kNr;
  }
  __mmask16 mask[kVectors];
#pragma GCC unroll 2
  for (int v = 0; v < kVectors; ++v) {
    const int64_t cols = n - 16 * v;
    mask[v] = cols >= 16 ? __mmask16(0xFFFF) : cols <= 0 ? __mmask16(0) : __mmask16((1u << cols) - 1);
  }
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
    float* row = c + i * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < kVectors; ++v) {
      __m512 r = acc[i][v];
      if (row_bias) r = _mm512_add_ps(r, _mm512_set1_ps(row_bias[i]));
      if (accumulate) r = _mm512_add_ps(r, _mm512_maskz_loadu_ps(mask[v], row + 16 * v));
      if (clamp) r = _mm512_min_ps(_mm512_set1_ps(clamp->hi), _mm512_max_ps(_mm512_set1_ps(clamp->lo), r));  // NaN propagates
      _mm512_mask_storeu_ps(row + 16 * v, mask[v], r);
    }
  }
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, const int64_t*, float*, int64_t, int64_t, bool,
                        const float*, const GemmClamp*);

template <int kVectors, bool kPacked, bool kOffsetB, bool kStream, int... kRows>
constexpr std::array<TileFn, sizeof...(kRows)> tile_table(std::integer_sequence<int, kRows...>) {
  return {tile_kernel<kRows + 1, kVectors, kPacked, kOffsetB, kStream>...};
}

template <bool kStream>
void microkernel(int64_t k, const float* a, int64_t a_row_stride, const float* b, float* c, int64_t ldc, int64_t m,
                 int64_t n, bool accumulate, const float* row_bias, const GemmClamp* clamp) {
  // [in place][two vectors][rows - 1]
  static constexpr std::array<TileFn, kMr> tiles[2][2] = {
      {tile_table<1, true, false, kStream>(std::make_integer_sequence<int, kMr>()),
       tile_table<2, true, false, kStream>(std::make_integer_sequence<int, kMr>())},
      {tile_table<1, false, false, kStream>(std::make_integer_sequence<int, kMr>()),
       tile_table<2, false, false, kStream>(std::make_integer_sequence<int, kMr>())}};
  if (m <= 0 || n <= 0) return;
  const int rows = static_cast<int>(m < kMr ? m : kMr);
  const TileFn tile = tiles[a_row_stride != 0][n > 16][rows - 1];
  tile(k, a, a_row_stride, b, nullptr, c, ldc, n, accumulate, row_bias, clamp);
}

void microkernel_offset_b(int64_t k, const float* a, const float* b, const int64_t* b_offsets, float* c, int64_t ldc,
                          int64_t m, int64_t n, bool accumulate, const float* row_bias, const GemmClamp* clamp) {
  // [two vectors][rows - 1]
  static constexpr std::array<TileFn, kMr> tiles[2] = {
      tile_table<1, true, true, false>(std::make_integer_sequence<int, kMr>()),
      tile_table<2, true, true, false>(std::make_integer_sequence<int, kMr>())};
  if (m <= 0 || n <= 0) return;
  const int rows = static_cast<int>(m < kMr ? m : kMr);
  tiles[n > 16][rows - 1](k, a, 0, b, b_offsets, c, ldc, n, accumulate, row_bias, clamp);
}

/// GemmMicrokernel::run_row (the contract in nn_gemv_body.h): four rows of a 32-column panel at a time
/// into four pairs of accumulators.
void row_kernel(int64_t kc, const float* x, int64_t x_stride, const float* panels, int64_t count, float* partial,
                bool first) {
  for (int64_t p = 0; p < count; ++p) {
    const float* r = panels + p * kc * kNr;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0, d1 = a0;
    int64_t kk = 0;
    for (; kk + 3 < kc; kk += 4, r += 4 * kNr) {
      const __m512 x0 = _mm512_set1_ps(x[kk * x_stride]), x1 = _mm512_set1_ps(x[(kk + 1) * x_stride]);
      const __m512 x2 = _mm512_set1_ps(x[(kk + 2) * x_stride]), x3 = _mm512_set1_ps(x[(kk + 3) * x_stride]);
      a0 = _mm512_fmadd_ps(x0, _mm512_loadu_ps(r), a0);
      a1 = _mm512_fmadd_ps(x0, _mm512_loadu_ps(r + 16), a1);
      b0 = _mm512_fmadd_ps(x1, _mm512_loadu_ps(r + 32), b0);
      b1 = _mm512_fmadd_ps(x1, _mm512_loadu_ps(r + 48), b1);
      c0 = _mm512_fmadd_ps(x2, _mm512_loadu_ps(r + 64), c0);
      c1 = _mm512_fmadd_ps(x2, _mm512_loadu_ps(r + 80), c1);
      d0 = _mm512_fmadd_ps(x3, _mm512_loadu_ps(r + 96), d0);
      d1 = _mm512_fmadd_ps(x3, _mm512_loadu_ps(r + 112), d1);
    }
    for (; kk < kc; ++kk, r += kNr) {
      const __m512 x0 = _mm512_set1_ps(x[kk * x_stride]);
      a0 = _mm512_fmadd_ps(x0, _mm512_loadu_ps(r), a0);
      a1 = _mm512_fmadd_ps(x0, _mm512_loadu_ps(r + 16), a1);
    }
    __m512 s0 = _mm512_add_ps(_mm512_add_ps(a0, b0), _mm512_add_ps(c0, d0));
    __m512 s1 = _mm512_add_ps(_mm512_add_ps(a1, b1), _mm512_add_ps(c1, d1));
    float* out = partial + p * kNr;
    if (!first) {
      s0 = _mm512_add_ps(s0, _mm512_loadu_ps(out));
      s1 = _mm512_add_ps(s1, _mm512_loadu_ps(out + 16));
    }
    _mm512_storeu_ps(out, s0);
    _mm512_storeu_ps(out + 16, s1);
  }
}

}  // namespace

const GemmMicrokernel& gemm_microkernel_avx512() {
  static const GemmMicrokernel kernel{"avx512", kMr, kNr, microkernel<false>, microkernel_offset_b, row_kernel,
                                      microkernel<true>, avx512::gemm_rows};
  return kernel;
}

}  // namespace tessera::native
