// The u8 x s8 integer GEMM for CPUs with AVX512_VNNI (contract in
// quantization_internal.h): packing B into quads with its column sums, A's
// shift to uint8 with its row terms, and the tasks over the microkernel
// (quantization_gemm_avx512vnni.cc).
#include <algorithm>
#include <cstring>

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

}  // namespace

void pack_quad_b(const TensorView& b, const TensorView* zero_point, int64_t k, int64_t n, int64_t offset, QuadPackedB& out) {
  if (b.dtype != DType::kInt8 && b.dtype != DType::kUInt8) {
    throw_unsupported("integer product of ", dtype_name(b.dtype), " (int8 and uint8 are supported)");
  }
  const bool unsigned_b = b.dtype == DType::kUInt8;
  const auto* bytes = static_cast<const uint8_t*>(b.data) + offset;
  out.k = k;
  out.n = n;
  const int64_t panels = (n + kQuadGemmPanel - 1) / kQuadGemmPanel;
  const int64_t stride = quad_panel_stride(k);
  out.data.assign(static_cast<size_t>(panels * stride), int8_t{0});
  out.column_sums.assign(static_cast<size_t>(n), 0);
  out.column_zero_points.resize(static_cast<size_t>(n));
  // The shifted value b' = b - 128 for uint8 (as a byte: b ^ 0x80), b for int8.
  const uint8_t flip = unsigned_b ? 0x80 : 0x00;
  for (int64_t p = 0; p < k; ++p) {
    const uint8_t* row = bytes + p * n;
    for (int64_t j = 0; j < n; ++j) {
      const auto v = static_cast<int8_t>(row[j] ^ flip);
      out.data[static_cast<size_t>((j / kQuadGemmPanel) * stride + (p / 4) * 4 * kQuadGemmPanel +
                                   (j % kQuadGemmPanel) * 4 + p % 4)] = v;
      out.column_sums[static_cast<size_t>(j)] += v;
    }
  }
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
