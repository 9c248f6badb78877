// A few rows of A against B read in place, row-major (GemmMicrokernel::run_rows), in plain C++
// compiled into each ISA's file with its flags: the innermost loop runs along a row of B and a row
// of C, contiguous both, which the compiler vectorises directly (FMAs under AVX2 and AVX-512).
//
// Why: a product of one to four rows reads each element of B once; packing B first (gemm_f32's
// GotoBLAS path) reads it, writes it and reads it again, and keeping B packed for good (what
// native does with constant weights) holds a second copy of it. A region whose own backend keeps
// its weights (a oneDNN region of a decoder, whose one-token steps run on native's fallback) then
// held every weight three times. Reading B in place, eight rows at a time, is eight streams the
// hardware prefetchers follow; C's rows stay in cache while B passes through. Measured on Zen 4
// (one core; a GPT-2-sized decode step's products, 652 MB): four rows at a time with software
// prefetches eight rows ahead read B at 15.8 GB/s, eight rows without them 19.6 (AVX2: 15.3 ->
// 19.2), against 25 GB/s for a plain sum over the same memory; asking for rows ahead slowed every
// variant tried.
//
// Each file defines TESSERA_GEMM_ROWS_NAMESPACE before including this (the same source compiled
// once per ISA, in a namespace of its own: one shared inline definition would be whichever ISA's
// copy the linker kept).
#include <algorithm>
#include <cstdint>
#include <vector>

namespace tessera::native::TESSERA_GEMM_ROWS_NAMESPACE {

/// Rows of B summed into one partial before it is added to C: a blocked sum, as the packed kernels'
/// K-blocks make (one running sum over K = 4096 erred about six times as much).
constexpr int64_t kRowsBlock = 256;

/// o[r][j] += sum over p in [p0, p1) of a[r * lda + p] * b[p * ldb + j], for r < R and j < len.
template <int R>
void add_rows_block(int64_t p0, int64_t p1, const float* a, int64_t lda, const float* b, int64_t ldb, float* const* o,
                    int64_t len) {
  int64_t p = p0;
  for (; p + 8 <= p1; p += 8) {
    const float* __restrict b0 = b + p * ldb;
    const float* __restrict b1 = b0 + ldb;
    const float* __restrict b2 = b1 + ldb;
    const float* __restrict b3 = b2 + ldb;
    const float* __restrict b4 = b3 + ldb;
    const float* __restrict b5 = b4 + ldb;
    const float* __restrict b6 = b5 + ldb;
    const float* __restrict b7 = b6 + ldb;
    float x[R][8];
    for (int r = 0; r < R; ++r) {
      for (int q = 0; q < 8; ++q) x[r][q] = a[r * lda + p + q];
    }
#pragma GCC ivdep
    for (int64_t j = 0; j < len; ++j) {
      const float v0 = b0[j], v1 = b1[j], v2 = b2[j], v3 = b3[j], v4 = b4[j], v5 = b5[j], v6 = b6[j], v7 = b7[j];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        o[r][j] += (x[r][0] * v0 + x[r][1] * v1 + x[r][2] * v2 + x[r][3] * v3) +
                   (x[r][4] * v4 + x[r][5] * v5 + x[r][6] * v6 + x[r][7] * v7);
      }
    }
  }
  for (; p < p1; ++p) {
    const float* __restrict b0 = b + p * ldb;
    float x[R];
    for (int r = 0; r < R; ++r) x[r] = a[r * lda + p];
#pragma GCC ivdep
    for (int64_t j = 0; j < len; ++j) {
      const float v0 = b0[j];
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) o[r][j] += x[r] * v0;
    }
  }
}

/// c[r * ldc + j] = (accumulate ? c[r * ldc + j] : 0) + sum over p < k of a[r * lda + p] * b[p * ldb + j],
/// for r < R and j < n.
template <int R>
void gemm_rows_fixed(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc,
                     int64_t n, bool accumulate) {
  // Columns of C kept in cache while B's rows pass: whole rows where R rows of C fit in 256 KB (every
  // product of a GPT-2-sized decoder, its 50257-column head included), so B is read front to back.
  const int64_t chunk = std::max<int64_t>(16, (int64_t{1} << 16) / R);
  thread_local std::vector<float> partial_storage;
  for (int64_t j0 = 0; j0 < n; j0 += chunk) {
    const int64_t len = std::min(chunk, n - j0);
    float* out[R];
    float* partial[R];
    for (int r = 0; r < R; ++r) out[r] = c + r * ldc + j0;
    if (k > kRowsBlock || accumulate) {
      partial_storage.resize(static_cast<size_t>(R * len));
      for (int r = 0; r < R; ++r) partial[r] = partial_storage.data() + r * len;
    }
    for (int64_t p0 = 0; p0 < k; p0 += kRowsBlock) {
      const int64_t p1 = std::min(k, p0 + kRowsBlock);
      // The first block of a product not accumulating sums straight into C; the others into a partial.
      const bool direct = p0 == 0 && !accumulate;
      float* const* target = direct ? out : partial;
      for (int r = 0; r < R; ++r) std::fill(target[r], target[r] + len, 0.0f);
      add_rows_block<R>(p0, p1, a, lda, b + j0, ldb, target, len);
      if (direct) continue;
      for (int r = 0; r < R; ++r) {
        float* __restrict o = out[r];
        const float* __restrict s = partial[r];
        for (int64_t j = 0; j < len; ++j) o[j] += s[j];
      }
    }
    if (k == 0 && !accumulate) {
      for (int r = 0; r < R; ++r) std::fill(out[r], out[r] + len, 0.0f);
    }
  }
}

/// GemmMicrokernel::run_rows: gemm_rows_fixed for 1 <= rows <= kGemmRowsMax (4).
inline void gemm_rows(int64_t k, const float* a, int64_t lda, int rows, const float* b, int64_t ldb, float* c,
                      int64_t ldc, int64_t n, bool accumulate) {
  switch (rows) {
    case 1: return gemm_rows_fixed<1>(k, a, lda, b, ldb, c, ldc, n, accumulate);
    case 2: return gemm_rows_fixed<2>(k, a, lda, b, ldb, c, ldc, n, accumulate);
    case 3: return gemm_rows_fixed<3>(k, a, lda, b, ldb, c, ldc, n, accumulate);
    default: return gemm_rows_fixed<4>(k, a, lda, b, ldb, c, ldc, n, accumulate);
  }
}

}  // namespace tessera::native::TESSERA_GEMM_ROWS_NAMESPACE
