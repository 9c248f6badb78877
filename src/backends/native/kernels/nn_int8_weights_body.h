// The int8-weight row kernel (nn_int8_weights.h): the driver over panels and
// row groups that every ISA build shares, and the portable panel kernel as
// plain loops (nn_int8_weights.cc; nn_int8_weights_avx2.cc has its own panel
// kernel in intrinsics). Included inside an anonymous namespace by each file,
// which compiles it with its own flags. A panel row's 16 weights are
// converted to float once and serve every row of x; a single row splits K in
// four chains of accumulators, so that the additions do not wait on each
// other. No include guard: each file includes it once, after <cstdint>.

template <int kRows>
void int8_panel(int64_t k, const float* x, int64_t lda, const int8_t* panel, const float* scales, const float* bias,
                float lo, float hi, int64_t cols, float* y, int64_t ldc) {
  constexpr int kChains = kRows == 1 ? 4 : kRows == 2 ? 2 : 1;
  float acc[kChains][kRows][16] = {};
  int64_t p = 0;
  for (; p + kChains <= k; p += kChains) {
    for (int c = 0; c < kChains; ++c) {
      float w[16];
      for (int j = 0; j < 16; ++j) w[j] = static_cast<float>(panel[(p + c) * 16 + j]);
      for (int r = 0; r < kRows; ++r) {
        const float xv = x[r * lda + p + c];
        for (int j = 0; j < 16; ++j) acc[c][r][j] += xv * w[j];
      }
    }
  }
  for (; p < k; ++p) {
    float w[16];
    for (int j = 0; j < 16; ++j) w[j] = static_cast<float>(panel[p * 16 + j]);
    for (int r = 0; r < kRows; ++r) {
      const float xv = x[r * lda + p];
      for (int j = 0; j < 16; ++j) acc[0][r][j] += xv * w[j];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int64_t j = 0; j < cols; ++j) {
      float sum = acc[0][r][j];
      for (int c = 1; c < kChains; ++c) sum += acc[c][r][j];
      float v = sum * scales[j] + (bias ? bias[j] : 0.0f);
      v = v < lo ? lo : v;  // NaN stays NaN
      v = v > hi ? hi : v;
      y[r * ldc + j] = v;
    }
  }
}

/// The panels [panel_begin, panel_end) for every group of up to 4 rows, each
/// by Kernel::run<rows>(k, x, lda, panel, scales, bias, lo, hi, cols, y, ldc)
/// (the portable int8_panel above, or an ISA file's own).
template <typename Kernel>
void int8_rows_driver(const Int8Weights& w, int64_t rows, const float* x, int64_t lda, float* y, int64_t ldc,
                      const float* bias, float lo, float hi, int64_t panel_begin, int64_t panel_end) {
  const int64_t panel_bytes = w.k * kInt8WeightPanel;
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const int64_t j0 = p * kInt8WeightPanel;
    const int64_t cols = w.n - j0 < kInt8WeightPanel ? w.n - j0 : kInt8WeightPanel;
    const int8_t* panel = w.panels.data() + p * panel_bytes;
    const float* scales = w.scales.data() + j0;
    const float* b = bias ? bias + j0 : nullptr;
    for (int64_t r0 = 0; r0 < rows; r0 += 4) {
      const float* xr = x + r0 * lda;
      float* yr = y + r0 * ldc + j0;
      switch (rows - r0 < 4 ? rows - r0 : 4) {
        case 1: Kernel::template run<1>(w.k, xr, lda, panel, scales, b, lo, hi, cols, yr, ldc); break;
        case 2: Kernel::template run<2>(w.k, xr, lda, panel, scales, b, lo, hi, cols, yr, ldc); break;
        case 3: Kernel::template run<3>(w.k, xr, lda, panel, scales, b, lo, hi, cols, yr, ldc); break;
        default: Kernel::template run<4>(w.k, xr, lda, panel, scales, b, lo, hi, cols, yr, ldc); break;
      }
    }
  }
}
