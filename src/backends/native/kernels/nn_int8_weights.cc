// Packing int8 weights in panels, and the dispatch and threading of the row
// kernel (see nn_int8_weights.h).
#include "backends/native/kernels/nn_int8_weights.h"

#include <algorithm>
#include <cstdint>

#include "backends/native/cpu_features.h"

namespace tessera::native {
namespace {

#include "backends/native/kernels/nn_int8_weights_body.h"

struct PortablePanel {
  template <int kRows>
  static void run(int64_t k, const float* x, int64_t lda, const int8_t* panel, const float* scales, const float* bias,
                  float lo, float hi, int64_t cols, float* y, int64_t ldc) {
    int8_panel<kRows>(k, x, lda, panel, scales, bias, lo, hi, cols, y, ldc);
  }
};

Int8RowsFn rows_for_cpu() {
  static const Int8RowsFn fn = cpu_features().avx2_fma ? int8_weight_rows_avx2 : int8_weight_rows_portable;
  return fn;
}

}  // namespace

void int8_weight_rows_portable(const Int8Weights& w, int64_t rows, const float* x, int64_t lda, float* y, int64_t ldc,
                               const float* bias, float lo, float hi, int64_t panel_begin, int64_t panel_end) {
  int8_rows_driver<PortablePanel>(w, rows, x, lda, y, ldc, bias, lo, hi, panel_begin, panel_end);
}

Int8Weights pack_int8_weights(const int8_t* q, int64_t k, int64_t n, const float* scales, int64_t scale_count,
                              bool transposed) {
  Int8Weights w;
  w.k = k;
  w.n = n;
  w.scales.resize(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) w.scales[static_cast<size_t>(j)] = scales[scale_count == 1 ? 0 : j];
  const int64_t panels = (n + kInt8WeightPanel - 1) / kInt8WeightPanel;
  w.panels.assign(static_cast<size_t>(panels * k * kInt8WeightPanel), 0);
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) {
      w.panels[static_cast<size_t>(((j / kInt8WeightPanel) * k + p) * kInt8WeightPanel + j % kInt8WeightPanel)] =
          transposed ? q[j * k + p] : q[p * n + j];
    }
  }
  return w;
}

void int8_weight_rows(const Int8Weights& w, int64_t rows, const float* x, int64_t lda, float* y, int64_t ldc,
                      const float* bias, float lo, float hi, const ThreadPool* pool) {
  const Int8RowsFn fn = rows_for_cpu();
  const int64_t panels = (w.n + kInt8WeightPanel - 1) / kInt8WeightPanel;
  if (!pool) return fn(w, rows, x, lda, y, ldc, bias, lo, hi, 0, panels);
  // Tasks of at least 64 KB of weights.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 16) / std::max<int64_t>(1, w.k * kInt8WeightPanel));
  pool->parallel_for(panels, grain, [&](int64_t begin, int64_t end) { fn(w, rows, x, lda, y, ldc, bias, lo, hi, begin, end); });
}

}  // namespace tessera::native
