// Float32 products by int8 weights with a scale per column: the native
// backend's MatMulInt8Weights composite (a weight-only int8 model's
// MatMul(x, DequantizeLinear(q, scales)), ir/int8_weights.h) lowers to a
// MatMul that reads q packed in panels. A token step of a decoder, bound by
// reading every weight once, reads a quarter of float32's bytes. Each product
// sums x * q in float32 and scales the sum once: DequantizeLinear-then-MatMul's
// value up to rounding order.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "backends/native/thread_pool.h"

namespace tessera::native {

/// Columns of 16: panel p holds rows 0..k-1 of columns 16p..16p+15, 16 bytes
/// a row (zeros past n).
inline constexpr int64_t kInt8WeightPanel = 16;

struct Int8Weights {
  int64_t k = 0, n = 0;
  std::vector<float> scales;   // n
  std::vector<int8_t> panels;  // ceil(n / 16) * k * 16
};

/// q[k x n] (row-major; `transposed`: stored n x k) in panels, with
/// `scale_count` scales (1: one for every column, else n).
Int8Weights pack_int8_weights(const int8_t* q, int64_t k, int64_t n, const float* scales, int64_t scale_count,
                              bool transposed = false);

/// y[r, j] = clamp(scale[j] * sum_p x[r, p] * q[p, j] + bias[j], lo, hi) for
/// `rows` rows of x (row stride lda) and y (row stride ldc); bias may be null.
/// Spread over the pool's threads by panels.
void int8_weight_rows(const Int8Weights& w, int64_t rows, const float* x, int64_t lda, float* y, int64_t ldc,
                      const float* bias, float lo, float hi, const ThreadPool* pool);

/// One ISA build of the row kernel over panels [panel_begin, panel_end) and at
/// most 4 rows; int8_weight_rows picks the widest this CPU runs.
using Int8RowsFn = void (*)(const Int8Weights& w, int64_t rows, const float* x, int64_t lda, float* y, int64_t ldc,
                            const float* bias, float lo, float hi, int64_t panel_begin, int64_t panel_end);
void int8_weight_rows_portable(const Int8Weights& w, int64_t rows, const float* x, int64_t lda, float* y, int64_t ldc,
                               const float* bias, float lo, float hi, int64_t panel_begin, int64_t panel_end);
void int8_weight_rows_avx2(const Int8Weights& w, int64_t rows, const float* x, int64_t lda, float* y, int64_t ldc,
                           const float* bias, float lo, float hi, int64_t panel_begin, int64_t panel_end);

}  // namespace tessera::native
