// The u8 x s8 integer GEMM's microkernel (quad_gemm_packed in
// quantization_internal.h) for AVX-512 with VNNI (flags from the file name; see
// CMakeLists.txt). Chosen at run time from CPU features in quantization_matmul.cc.
//
// B arrives packed by pack_quad_b: panels of kQuadGemmPanel = 16 columns, in
// each panel the rows of B in quads, the four values of a quad side by side per
// column (64 bytes a quad: one zmm). One step broadcasts four consecutive
// uint8 values of a row of A into every 32-bit lane and vpdpbusd adds the four
// u8 x s8 products of each lane to its int32 accumulator (exact: four products
// of at most 255 * 128 never wrap, and the sums are taken modulo 2^32 like the
// zero-point terms the last K block subtracts; see quad_gemm_packed).
// Tiles of up to 8 rows x 32 columns (two panels) keep 16 accumulators in
// registers over a block of K.
#include <immintrin.h>

#include <cstring>

#include "backends/native/kernels/quantization_internal.h"

namespace tessera::native {
namespace {

constexpr int64_t kRows = 8;
constexpr int64_t kBlockK = 1024;  // a multiple of 4: two panels' slice of B is 32 KiB (measured faster than 512 on Zen 4)

/// The quad of A at `a` as one 32-bit lane; `bytes` < 4 reads only that many
/// (the zero padding of B makes the rest irrelevant, but it must not be read).
inline int32_t a_quad(const uint8_t* a, int64_t bytes) {
  int32_t v = 0;
  std::memcpy(&v, a, static_cast<size_t>(bytes < 4 ? bytes : 4));
  return v;
}

/// kR rows x (16 * kP) columns of C over `k` values of K from `k0`.
template <int kR, int kP>
void quad_tile(const QuadTileArgs& t, int64_t i0, int64_t j0, int64_t k0, int64_t k, int64_t cols) {
  __m512i acc[kR][2];
  for (int r = 0; r < kR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  const uint8_t* a = t.a + i0 * t.lda + k0;
  const int8_t* b0 = t.packed_b + (j0 / kQuadGemmPanel) * t.panel_stride + k0 * kQuadGemmPanel;
  const int8_t* b1 = b0 + t.panel_stride;
  const int64_t quads = k / 4, tail = k % 4;
  for (int64_t q = 0; q < quads; ++q) {
    const __m512i w0 = _mm512_loadu_si512(b0 + q * 64);
    const __m512i w1 = kP == 2 ? _mm512_loadu_si512(b1 + q * 64) : _mm512_setzero_si512();
    for (int r = 0; r < kR; ++r) {
      int32_t quad;
      std::memcpy(&quad, a + r * t.lda + 4 * q, sizeof quad);
      const __m512i av = _mm512_set1_epi32(quad);
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, w0);
      if (kP == 2) acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, w1);
    }
  }
  if (tail != 0) {
    const __m512i w0 = _mm512_loadu_si512(b0 + quads * 64);
    const __m512i w1 = kP == 2 ? _mm512_loadu_si512(b1 + quads * 64) : _mm512_setzero_si512();
    for (int r = 0; r < kR; ++r) {
      const __m512i av = _mm512_set1_epi32(a_quad(a + r * t.lda + 4 * quads, tail));
      acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, w0);
      if (kP == 2) acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, w1);
    }
  }
  const bool first = k0 == 0, last = k0 + k == t.k;
  // Columns of this tile in each of its (up to) two zmm.
  const int64_t cols0 = cols < 16 ? cols : 16, cols1 = cols - cols0;
  const __mmask16 mask0 = static_cast<__mmask16>((1u << cols0) - 1u);
  const __mmask16 mask1 = static_cast<__mmask16>((1u << cols1) - 1u);
  __m512i column_sums[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  __m512i column_zero_points[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  if (last) {
    for (int h = 0; h < kP; ++h) {
      const __mmask16 m = h == 0 ? mask0 : mask1;
      column_sums[h] = _mm512_maskz_loadu_epi32(m, t.column_sums + j0 + 16 * h);
      column_zero_points[h] = _mm512_maskz_loadu_epi32(m, t.column_zero_points + j0 + 16 * h);
    }
  }
  for (int r = 0; r < kR; ++r) {
    int32_t* crow = t.c + (i0 + r) * t.ldc + j0;
    for (int h = 0; h < kP; ++h) {
      const __mmask16 m = h == 0 ? mask0 : mask1;
      if (m == 0) continue;
      __m512i v = acc[r][h];
      if (!first) v = _mm512_add_epi32(v, _mm512_maskz_loadu_epi32(m, crow + 16 * h));
      if (last) {
        // C -= zb_j * (rowsum_i - k za_i) + za_i * colsum_j, modulo 2^32.
        const __m512i row_term = _mm512_set1_epi32(t.row_terms[i0 + r]);
        const __m512i row_zero_point = _mm512_set1_epi32(t.row_zero_points[i0 + r]);
        v = _mm512_sub_epi32(v, _mm512_mullo_epi32(column_zero_points[h], row_term));
        v = _mm512_sub_epi32(v, _mm512_mullo_epi32(row_zero_point, column_sums[h]));
      }
      _mm512_mask_storeu_epi32(crow + 16 * h, m, v);
    }
  }
}

template <int kP>
void quad_tile_rows(int64_t rows, const QuadTileArgs& t, int64_t i0, int64_t j0, int64_t k0, int64_t k, int64_t cols) {
  switch (rows) {
    case 1: return quad_tile<1, kP>(t, i0, j0, k0, k, cols);
    case 2: return quad_tile<2, kP>(t, i0, j0, k0, k, cols);
    case 3: return quad_tile<3, kP>(t, i0, j0, k0, k, cols);
    case 4: return quad_tile<4, kP>(t, i0, j0, k0, k, cols);
    case 5: return quad_tile<5, kP>(t, i0, j0, k0, k, cols);
    case 6: return quad_tile<6, kP>(t, i0, j0, k0, k, cols);
    case 7: return quad_tile<7, kP>(t, i0, j0, k0, k, cols);
    default: return quad_tile<8, kP>(t, i0, j0, k0, k, cols);
  }
}

}  // namespace

void quad_gemm_tiles_avx512vnni(const QuadTileArgs& t, int64_t i_begin, int64_t i_end, int64_t j_begin, int64_t j_end) {
  for (int64_t k0 = 0; k0 < t.k; k0 += kBlockK) {
    const int64_t kb = t.k - k0 < kBlockK ? t.k - k0 : kBlockK;
    for (int64_t j0 = j_begin; j0 < j_end; j0 += 2 * kQuadGemmPanel) {
      const int64_t cols = j_end - j0 < 2 * kQuadGemmPanel ? j_end - j0 : 2 * kQuadGemmPanel;
      for (int64_t i0 = i_begin; i0 < i_end; i0 += kRows) {
        const int64_t rows = i_end - i0 < kRows ? i_end - i0 : kRows;
        if (cols > kQuadGemmPanel) {
          quad_tile_rows<2>(rows, t, i0, j0, k0, kb, cols);
        } else {
          quad_tile_rows<1>(rows, t, i0, j0, k0, kb, cols);
        }
      }
    }
  }
}

}  // namespace tessera::native
