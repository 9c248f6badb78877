// The float32 2-D max pooling of one (N, C) plane, written as plain loops that
// the compiler vectorises. Included by nn_pool.cc (baseline ISA),
// nn_pool_avx2.cc and nn_pool_avx512.cc (their ISA flags, and
// -fno-trapping-math: GCC makes the NaN-propagating selects blends only when
// it may assume comparisons do not trap) inside a namespace each names, so the
// same source is compiled for each ISA. Pure: no allocation, no globals.
//
// Each output row is made in passes over contiguous rows (vector maxima): the
// window's input rows reduced element by element into one row, then the
// maximum of the window's column taps at every column, of which every
// stride-th is the output (a strided copy). A NaN anywhere in a window gives
// NaN, as the window walk, numpy's max and PyTorch do.
//
// Each file defines TESSERA_POOL_ROWS_NAMESPACE before including this.
#include <algorithm>
#include <cstdint>

#include "backends/native/kernels/nn_pool_plane.h"

namespace tessera::native::TESSERA_POOL_ROWS_NAMESPACE {

/// a, unless b is larger or a NaN lies in b (a NaN in a is kept). Bitwise, not ||: a branch
/// would keep the loops scalar.
inline float max_nan(float a, float b) { return static_cast<bool>((b > a) | (b != b)) ? b : a; }

/// dst[w] = max_nan(dst[w], src[w]) for w in [0, n): contiguous, so vector maxima.
inline void max_into(float* dst, const float* src, int64_t n) {
  for (int64_t w = 0; w < n; ++w) dst[w] = max_nan(dst[w], src[w]);
}

/// `scratch` holds 2 * width floats.
inline void max_pool_plane(const MaxPoolPlane& s, const float* x, float* y, float* scratch) {
  const int64_t H = s.height, W = s.width, OW = s.out_width;
  float* rows = scratch;          // the window's input rows, reduced
  float* columns = scratch + W;   // then its columns: columns[w] = max over taps of rows[w + k * dilation_w]
  // Output columns whose every tap lies in [0, W): ow * sw - pad_w >= 0 and
  // ow * sw - pad_w + (kw - 1) * dw < W.
  const int64_t span = (s.kernel_w - 1) * s.dilation_w;
  const int64_t lo = std::min(OW, (s.pad_w + s.stride_w - 1) / s.stride_w);
  const int64_t hi = W - 1 - span + s.pad_w < 0 ? lo : std::clamp((W - 1 - span + s.pad_w) / s.stride_w + 1, lo, OW);
  for (int64_t oh = 0; oh < s.out_height; ++oh) {
    const float* row = nullptr;
    for (int64_t kh = 0; kh < s.kernel_h; ++kh) {
      const int64_t ih = oh * s.stride_h - s.pad_h + kh * s.dilation_h;
      if (ih < 0 || ih >= H) continue;
      const float* in = x + ih * W;
      if (!row) {
        row = in;  // one row so far: read in place
      } else {
        if (row != rows) std::copy(row, row + W, rows);
        max_into(rows, in, W);
        row = rows;
      }
    }
    float* out = y + oh * OW;
    if (!row) {  // (a window of padding only: ONNX's pads are smaller than the kernel, so never)
      for (int64_t ow = 0; ow < OW; ++ow) out[ow] = -__builtin_inff();
      continue;
    }
    // Edge columns, whose window reaches into the padding: only the taps in range.
    auto edge = [&](int64_t ow) {
      float m = -__builtin_inff();
      for (int64_t kw = 0; kw < s.kernel_w; ++kw) {
        const int64_t iw = ow * s.stride_w - s.pad_w + kw * s.dilation_w;
        if (iw >= 0 && iw < W) m = max_nan(m, row[iw]);
      }
      out[ow] = m;
    };
    for (int64_t ow = 0; ow < lo; ++ow) edge(ow);
    for (int64_t ow = hi; ow < OW; ++ow) edge(ow);
    if (hi <= lo) continue;
    // The interior: every tap's maximum at every column (contiguous), then every stride-th of them.
    const float* taps = row;
    if (s.kernel_w > 1) {
      const int64_t n = W - span;
      std::copy(row, row + n, columns);
      for (int64_t k = 1; k < s.kernel_w; ++k) max_into(columns, row + k * s.dilation_w, n);
      taps = columns;
    }
    const float* at = taps - s.pad_w;
    if (s.stride_w == 1) {
      std::copy(at + lo, at + hi, out + lo);
    } else if (s.stride_w == 2) {
      for (int64_t ow = lo; ow < hi; ++ow) out[ow] = at[2 * ow];
    } else {
      for (int64_t ow = lo; ow < hi; ++ow) out[ow] = at[ow * s.stride_w];
    }
  }
}

/// `planes` consecutive planes of x into y.
inline void max_pool_planes(const MaxPoolPlane& s, const float* x, float* y, int64_t planes, float* scratch) {
  for (int64_t p = 0; p < planes; ++p) {
    max_pool_plane(s, x + p * s.height * s.width, y + p * s.out_height * s.out_width, scratch);
  }
}

}  // namespace tessera::native::TESSERA_POOL_ROWS_NAMESPACE
