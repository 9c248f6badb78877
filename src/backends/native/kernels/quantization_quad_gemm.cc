// The u8 x s8 integer GEMM for CPUs with AVX512_VNNI (contract in
// quantization_internal.h): packing B into quads with its column sums, A's
// shift to uint8 with its row terms, and the tasks over the microkernel
// (quantization_gemm_avx512vnni.cc).
#include <algorithm>
#include <cstring>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "backends/native/cpu_features.h"
#include "backends/native/kernels/quantization_internal.h"

namespace tessera::native {

bool quad_gemm_available() { return cpu_features().avx512_vnni; }

namespace {

/// The zero point of index i (per tensor: one value; else one per index), or 0.
int32_t zero_point_at(const TensorView* zero_point, int64_t i) {
  if (!zero_point || zero_point->numel() == 0) return 0;
  return static_cast<int32_t>(view_int_at(*zero_point, zero_point->numel() == 1 ? 0 : i));
}

/// Unsigned wrap-around arithmetic for the zero-point terms (exact modulo 2^32).
inline int32_t wrap(uint32_t v) { return static_cast<int32_t>(v); }

#if defined(__SSE2__)
/// Adds the int16 lanes of `sums16` (16 columns: low 8, high 8) into 16 int32 sums.
inline void flush_column_sums(const __m128i sums16[2], int32_t* column_sums) {
  auto* out = reinterpret_cast<__m128i*>(column_sums);
  for (int h = 0; h < 2; ++h) {
    const __m128i lo = _mm_srai_epi32(_mm_unpacklo_epi16(sums16[h], sums16[h]), 16);
    const __m128i hi = _mm_srai_epi32(_mm_unpackhi_epi16(sums16[h], sums16[h]), 16);
    _mm_storeu_si128(out + 2 * h, _mm_add_epi32(_mm_loadu_si128(out + 2 * h), lo));
    _mm_storeu_si128(out + 2 * h + 1, _mm_add_epi32(_mm_loadu_si128(out + 2 * h + 1), hi));
  }
}

/// One whole panel (16 columns): each 4 x 16 block of bytes transposed so the
/// four values of a column sit side by side, the column sums kept in int16
/// (exact over 128 rows of values in [-128, 127]) and flushed into int32.
void pack_quad_panel_sse2(int64_t k, const int8_t* b, int64_t ldb, int8_t* out, int32_t* column_sums) {
  __m128i sums16[2] = {_mm_setzero_si128(), _mm_setzero_si128()};
  for (int64_t p = 0; p < k; p += 4, out += 4 * kQuadGemmPanel) {
    const int64_t rows = std::min<int64_t>(4, k - p);
    __m128i r[4];
    for (int64_t q = 0; q < 4; ++q) {
      r[q] = q < rows ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + (p + q) * ldb)) : _mm_setzero_si128();
      sums16[0] = _mm_add_epi16(sums16[0], _mm_srai_epi16(_mm_unpacklo_epi8(r[q], r[q]), 8));
      sums16[1] = _mm_add_epi16(sums16[1], _mm_srai_epi16(_mm_unpackhi_epi8(r[q], r[q]), 8));
    }
    const __m128i t0 = _mm_unpacklo_epi8(r[0], r[1]), t1 = _mm_unpackhi_epi8(r[0], r[1]);
    const __m128i t2 = _mm_unpacklo_epi8(r[2], r[3]), t3 = _mm_unpackhi_epi8(r[2], r[3]);
    auto* o = reinterpret_cast<__m128i*>(out);
    _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(t0, t2));
    _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(t0, t2));
    _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(t1, t3));
    _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(t1, t3));
    if ((p / 4) % 32 == 31) {  // 128 rows
      flush_column_sums(sums16, column_sums);
      sums16[0] = sums16[1] = _mm_setzero_si128();
    }
  }
  flush_column_sums(sums16, column_sums);
}
#endif

}  // namespace

void pack_quad_panels(int64_t k, int64_t n, const int8_t* b, int64_t ldb, int8_t* packed, int32_t* column_sums) {
  const int64_t stride = quad_panel_stride(k);
  for (int64_t j0 = 0; j0 < n; j0 += kQuadGemmPanel, packed += stride) {
    const int64_t cols = std::min(kQuadGemmPanel, n - j0);
#if defined(__SSE2__)
    if (cols == kQuadGemmPanel) {
      pack_quad_panel_sse2(k, b + j0, ldb, packed, column_sums + j0);
      continue;
    }
#endif
    for (int64_t p = 0; p < k; p += 4) {
      int8_t* out = packed + p * kQuadGemmPanel;
      std::memset(out, 0, 4 * kQuadGemmPanel);
      for (int64_t q = 0; q < std::min<int64_t>(4, k - p); ++q) {
        const int8_t* row = b + (p + q) * ldb + j0;
        for (int64_t j = 0; j < cols; ++j) {
          out[j * 4 + q] = row[j];
          column_sums[j0 + j] += row[j];
        }
      }
    }
  }
}

void pack_quad_b(const TensorView& b, const TensorView* zero_point, int64_t k, int64_t n, int64_t offset, QuadPackedB& out) {
  if (b.dtype != DType::kInt8 && b.dtype != DType::kUInt8) {
    throw_unsupported("integer product of ", dtype_name(b.dtype), " (int8 and uint8 are supported)");
  }
  const bool unsigned_b = b.dtype == DType::kUInt8;
  const auto* bytes = static_cast<const uint8_t*>(b.data) + offset;
  out.k = k;
  out.n = n;
  // The shifted value b' = b - 128 for uint8 (as a byte: b ^ 0x80), b for int8.
  const uint8_t flip = unsigned_b ? 0x80 : 0x00;
  std::vector<int8_t> shifted(static_cast<size_t>(k * n));
  for (int64_t i = 0; i < k * n; ++i) shifted[static_cast<size_t>(i)] = static_cast<int8_t>(bytes[i] ^ flip);
  out.data.resize(static_cast<size_t>(((n + kQuadGemmPanel - 1) / kQuadGemmPanel) * quad_panel_stride(k)));
  out.column_sums.assign(static_cast<size_t>(n), 0);
  pack_quad_panels(k, n, shifted.data(), n, out.data.data(), out.column_sums.data());
  out.column_zero_points.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    out.column_zero_points[static_cast<size_t>(j)] = zero_point_at(zero_point, j) - (unsigned_b ? 128 : 0);
  }
}

void quad_a(const TensorView& a, int64_t m, int64_t k, int64_t offset, const TensorView* zero_point, uint8_t* shifted,
            QuadA& out) {
  if (a.dtype != DType::kInt8 && a.dtype != DType::kUInt8) {
    throw_unsupported("integer product of ", dtype_name(a.dtype), " (int8 and uint8 are supported)");
  }
  const bool signed_a = a.dtype == DType::kInt8;
  const uint8_t* rows = static_cast<const uint8_t*>(a.data) + offset;
  if (signed_a) {
    // a' = a + 128 (as a byte: a ^ 0x80), in [0, 255].
    for (int64_t i = 0; i < m * k; ++i) shifted[i] = rows[i] ^ 0x80;
    rows = shifted;
  }
  out.data = rows;
  out.lda = k;
  out.row_zero_points.resize(static_cast<size_t>(m));
  out.row_terms.resize(static_cast<size_t>(m));
  for (int64_t i = 0; i < m; ++i) {
    const uint8_t* row = rows + i * k;
    uint32_t sum = 0;
    for (int64_t p = 0; p < k; ++p) sum += row[p];
    const int32_t za = zero_point_at(zero_point, i) + (signed_a ? 128 : 0);
    out.row_zero_points[static_cast<size_t>(i)] = za;
    out.row_terms[static_cast<size_t>(i)] = wrap(sum - static_cast<uint32_t>(k) * static_cast<uint32_t>(za));
  }
}

void quad_gemm_packed(int64_t m, const QuadA& a, const QuadPackedB& b, int32_t* c, int64_t ldc, const ThreadPool& pool) {
  if (b.k == 0) {  // an empty sum
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + b.n, 0);
    return;
  }
  QuadTileArgs t;
  t.k = b.k;
  t.a = a.data;
  t.lda = a.lda;
  t.row_zero_points = a.row_zero_points.data();
  t.row_terms = a.row_terms.data();
  t.packed_b = b.data.data();
  t.panel_stride = quad_panel_stride(b.k);
  t.column_sums = b.column_sums.data();
  t.column_zero_points = b.column_zero_points.data();
  t.c = c;
  t.ldc = ldc;
  // Tasks are 32 x 128 tiles of C (whole 8 x 32 microkernel tiles), a few per thread on large products.
  constexpr int64_t kTaskRows = 32, kTaskColumns = 128;
  const int64_t n = b.n;
  const int64_t row_tasks = (m + kTaskRows - 1) / kTaskRows, column_tasks = (n + kTaskColumns - 1) / kTaskColumns;
  const int64_t grain = std::max<int64_t>(1, (1 << 19) / std::max<int64_t>(1, kTaskRows * kTaskColumns * b.k));
  pool.parallel_for(row_tasks * column_tasks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t i0 = (task / column_tasks) * kTaskRows, j0 = (task % column_tasks) * kTaskColumns;
      quad_gemm_tiles_avx512vnni(t, i0, std::min(m, i0 + kTaskRows), j0, std::min(n, j0 + kTaskColumns));
    }
  });
}

}  // namespace tessera::native
