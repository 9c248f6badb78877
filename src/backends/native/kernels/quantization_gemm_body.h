// The integer GEMM's microkernel (see integer_gemm_packed in
// quantization_internal.h), included inside an anonymous namespace by each
// ISA's file, which compiles it with its own flags (quantization_matmul.cc:
// baseline; *_avx2.cc, *_avx512.cc) and picks its code path from the
// compiler's ISA macros.
//
// B arrives packed (pack_integer_b): panels of kIntegerGemmPanel = 16 columns,
// in each panel the rows of B in pairs, both values of a pair side by side per
// column. One step multiplies a broadcast pair (a[i][p], a[i][p+1]) with a
// panel row pair: pmaddwd gives a[i][p] * b[p][j] + a[i][p+1] * b[p+1][j] per
// column in int32, exact for the zero-point-adjusted values (|v| <= 255).
// Tiles of kRows rows x 16 (AVX2: two ymm) or 32 (AVX-512: two zmm over two
// panels) columns keep their accumulators in registers over a block of K.
// Deliberately uses no std:: templates: their out-of-line copies would be
// shared across files compiled for different ISAs.
// (No include guard or pragma once: each file includes it exactly once, after
// <cstring> and, for the AVX files, <immintrin.h>.)

/// The pair (a[0], a[1]) as one 32-bit lane; `single` reads only a[0] (the
/// last, odd row of K).
inline int32_t a_pair(const int16_t* a, bool single) {
  int32_t v = 0;
  if (single) {
    v = static_cast<uint16_t>(a[0]);
  } else {
    std::memcpy(&v, a, sizeof v);
  }
  return v;
}

#if defined(__AVX512BW__)

constexpr int64_t kTileRows = 8;
constexpr int64_t kTilePanels = 2;  // 32 columns: two zmm per row

/// rows x (16 * panels) tile of C over k (pairs of packed B rows from `pb`,
/// panel stride `panel_stride`); adds to C when `accumulate`.
template <int kR, int kP>
void integer_tile(int64_t k, const int16_t* a, int64_t lda, const int16_t* pb, int64_t panel_stride, int32_t* c,
                  int64_t ldc, int64_t cols, bool accumulate) {
  __m512i acc[kR][2];
  for (int r = 0; r < kR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  // Pairs of K rows; the odd last row's pair has B's zero padding as its second value.
  const int64_t pairs = (k + 1) / 2;
  for (int64_t q = 0; q < pairs; ++q) {
    const bool single = 2 * q + 1 == k;
    const __m512i b0 = _mm512_loadu_si512(pb + q * 32);
    const __m512i b1 = kP == 2 ? _mm512_loadu_si512(pb + panel_stride + q * 32) : _mm512_setzero_si512();
    for (int r = 0; r < kR; ++r) {
      const __m512i av = _mm512_set1_epi32(a_pair(a + r * lda + 2 * q, single));
      acc[r][0] = _mm512_add_epi32(acc[r][0], _mm512_madd_epi16(av, b0));
      if (kP == 2) acc[r][1] = _mm512_add_epi32(acc[r][1], _mm512_madd_epi16(av, b1));
    }
  }
  alignas(64) int32_t tile[32];
  for (int r = 0; r < kR; ++r) {
    int32_t* crow = c + r * ldc;
    _mm512_store_si512(tile, acc[r][0]);
    _mm512_store_si512(tile + 16, acc[r][1]);
    for (int64_t j = 0; j < cols; ++j) crow[j] = accumulate ? crow[j] + tile[j] : tile[j];
  }
}

#elif defined(__AVX2__)

constexpr int64_t kTileRows = 5;
constexpr int64_t kTilePanels = 1;  // 16 columns: two ymm per row

template <int kR, int kP>
void integer_tile(int64_t k, const int16_t* a, int64_t lda, const int16_t* pb, int64_t /*panel_stride*/, int32_t* c,
                  int64_t ldc, int64_t cols, bool accumulate) {
  static_assert(kP == 1, "one panel per AVX2 tile");
  __m256i acc[kR][2];
  for (int r = 0; r < kR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  // Pairs of K rows; the odd last row's pair has B's zero padding as its second value.
  const int64_t pairs = (k + 1) / 2;
  for (int64_t q = 0; q < pairs; ++q) {
    const bool single = 2 * q + 1 == k;
    const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + q * 32));
    const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pb + q * 32 + 16));
    for (int r = 0; r < kR; ++r) {
      const __m256i av = _mm256_set1_epi32(a_pair(a + r * lda + 2 * q, single));
      acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
      acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
    }
  }
  alignas(32) int32_t tile[16];
  for (int r = 0; r < kR; ++r) {
    int32_t* crow = c + r * ldc;
    if (cols == 16 && !accumulate) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(crow), acc[r][0]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(crow + 8), acc[r][1]);
      continue;
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(tile), acc[r][0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(tile + 8), acc[r][1]);
    for (int64_t j = 0; j < cols; ++j) crow[j] = accumulate ? crow[j] + tile[j] : tile[j];
  }
}

#else

constexpr int64_t kTileRows = 4;
constexpr int64_t kTilePanels = 1;

/// Plain loops over the same packed layout (the compiler vectorises the column
/// loop).
template <int kR, int kP>
void integer_tile(int64_t k, const int16_t* a, int64_t lda, const int16_t* pb, int64_t /*panel_stride*/, int32_t* c,
                  int64_t ldc, int64_t cols, bool accumulate) {
  int32_t acc[kR][16] = {};
  const int64_t pairs = (k + 1) / 2;
  for (int64_t q = 0; q < pairs; ++q) {
    const bool single = 2 * q + 1 == k;
    const int16_t* brow = pb + q * 32;
    for (int r = 0; r < kR; ++r) {
      const int32_t a0 = a[r * lda + 2 * q], a1 = single ? 0 : a[r * lda + 2 * q + 1];
      for (int j = 0; j < 16; ++j) acc[r][j] += a0 * brow[2 * j] + a1 * brow[2 * j + 1];
    }
  }
  for (int r = 0; r < kR; ++r) {
    int32_t* crow = c + r * ldc;
    for (int64_t j = 0; j < cols; ++j) crow[j] = accumulate ? crow[j] + acc[r][j] : acc[r][j];
  }
}

#endif

/// A tile of `rows` (< kTileRows allowed) rows: the row count as a template
/// argument.
template <int kP>
void integer_tile_rows(int64_t rows, int64_t k, const int16_t* a, int64_t lda, const int16_t* pb, int64_t panel_stride,
                       int32_t* c, int64_t ldc, int64_t cols, bool accumulate) {
  switch (rows) {
    case 1:
      return integer_tile<1, kP>(k, a, lda, pb, panel_stride, c, ldc, cols, accumulate);
    case 2:
      return integer_tile<2, kP>(k, a, lda, pb, panel_stride, c, ldc, cols, accumulate);
    case 3:
      return integer_tile<3, kP>(k, a, lda, pb, panel_stride, c, ldc, cols, accumulate);
    case 4:
      return integer_tile<4, kP>(k, a, lda, pb, panel_stride, c, ldc, cols, accumulate);
#if defined(__AVX512BW__) || defined(__AVX2__)
    case 5:
      return integer_tile<5, kP>(k, a, lda, pb, panel_stride, c, ldc, cols, accumulate);
    case 6:
      return integer_tile<6, kP>(k, a, lda, pb, panel_stride, c, ldc, cols, accumulate);
#endif
#if defined(__AVX512BW__)
    case 7:
      return integer_tile<7, kP>(k, a, lda, pb, panel_stride, c, ldc, cols, accumulate);
    case 8:
      return integer_tile<8, kP>(k, a, lda, pb, panel_stride, c, ldc, cols, accumulate);
#endif
    default:
      break;
  }
}

/// C[m x n] = A[m x k] * B for B packed by pack_integer_b (pb: the panel of C's
/// first column; k is B's full row count, which sets the panel stride).
/// Blocks of K keep a panel's slice of B in L1 while every row tile passes it.
void integer_gemm_tiles(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda, const int16_t* pb, int32_t* c,
                        int64_t ldc) {
  constexpr int64_t kBlockK = 512;  // even: blocks start on a pair
  const int64_t panel_stride = integer_panel_stride(k);
  for (int64_t k0 = 0; k0 < k; k0 += kBlockK) {
    const int64_t kb = k - k0 < kBlockK ? k - k0 : kBlockK;
    for (int64_t j0 = 0; j0 < n; j0 += kIntegerGemmPanel * kTilePanels) {
      const int64_t cols = n - j0 < kIntegerGemmPanel * kTilePanels ? n - j0 : kIntegerGemmPanel * kTilePanels;
      const int16_t* panel = pb + (j0 / kIntegerGemmPanel) * panel_stride + k0 * kIntegerGemmPanel;
      for (int64_t i0 = 0; i0 < m; i0 += kTileRows) {
        const int64_t rows = m - i0 < kTileRows ? m - i0 : kTileRows;
        const int16_t* at = a + i0 * lda + k0;
        int32_t* ct = c + i0 * ldc + j0;
        if (cols > kIntegerGemmPanel) {
          integer_tile_rows<kTilePanels>(rows, kb, at, lda, panel, panel_stride, ct, ldc, cols, k0 > 0);
        } else {
          integer_tile_rows<1>(rows, kb, at, lda, panel, panel_stride, ct, ldc, cols, k0 > 0);
        }
      }
    }
  }
}
