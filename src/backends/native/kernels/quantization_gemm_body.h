// The integer GEMM's loop nest (see integer_gemm in quantization_internal.h),
// included inside an anonymous namespace by each ISA's file, which compiles it
// with its own flags (quantization_matmul.cc: baseline; *_avx2.cc, *_avx512.cc).
// Deliberately uses no std:: templates: their out-of-line copies would be
// shared across files compiled for different ISAs.
// (No include guard or pragma once: each file includes it exactly once.)

/// C = A * B over int16 operands with int32 accumulators: blocks of
/// kIntegerGemmRows rows x 256 columns stay in L1 while rows of B stream by;
/// the inner loop is a widening multiply-add the compiler vectorises.
void integer_gemm_body(int64_t m, int64_t n, int64_t k, const int16_t* a, const int16_t* b, int32_t* c, int64_t ldc) {
  constexpr int64_t kColumns = 256;
  for (int64_t i0 = 0; i0 < m; i0 += kIntegerGemmRows) {
    const int64_t rows = m - i0 < kIntegerGemmRows ? m - i0 : kIntegerGemmRows;
    for (int64_t j0 = 0; j0 < n; j0 += kColumns) {
      const int64_t cols = n - j0 < kColumns ? n - j0 : kColumns;
      alignas(64) int32_t acc[kIntegerGemmRows][kColumns] = {};
      for (int64_t p = 0; p < k; ++p) {
        const int16_t* __restrict brow = b + p * n + j0;
        for (int64_t r = 0; r < rows; ++r) {
          const int16_t av = a[(i0 + r) * k + p];
          int32_t* __restrict accr = acc[r];
          for (int64_t j = 0; j < cols; ++j) accr[j] += static_cast<int32_t>(av) * static_cast<int32_t>(brow[j]);
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        int32_t* crow = c + (i0 + r) * ldc + j0;
        for (int64_t j = 0; j < cols; ++j) crow[j] = acc[r][j];
      }
    }
  }
}
