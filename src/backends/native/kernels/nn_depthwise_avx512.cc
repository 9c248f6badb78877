// AVX-512 depthwise convolution of one 2-D plane: 16 output columns a vector,
// every tap accumulated in one register and stored once. Each tap reads the
// input row with a masked load whose mask drops the lanes that fall in the
// padding (they load as zero, which is what zero padding adds), so edges and
// narrow planes (7 or 14 wide) need no scalar path. Stride 2 de-interleaves
// two masked loads. The masks depend only on the column chunk and the tap
// column, so they are computed once per plane. Other strides, and planes
// wider than kMaxChunks vectors, take the portable kernel. Pure: no
// allocation, no globals. Compiled with AVX-512 flags only.
// GCC 12 warns that _mm512_min_ps/_mm512_max_ps read an "uninitialized" value:
// it is their own _mm512_undefined_ps() pass-through operand, a known false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>

#include "backends/native/kernels/nn_internal.h"

namespace tessera::native {
namespace {

constexpr int64_t kMaxChunks = 64;    // output widths up to 1024
constexpr int64_t kMaxKernelW = 16;
constexpr int64_t kMaxKernelH = 16;

/// Bits [lo, hi) of a 16-bit mask (empty when hi <= lo).
inline __mmask16 lane_range(int64_t lo, int64_t hi) {
  lo = std::clamp<int64_t>(lo, 0, 16);
  hi = std::clamp<int64_t>(hi, 0, 16);
  if (hi <= lo) return 0;
  const uint32_t upper = hi == 16 ? 0xFFFFu : ((1u << hi) - 1u);
  return static_cast<__mmask16>(upper & ~((1u << lo) - 1u));
}

}  // namespace

void depthwise_plane_avx512(const DepthwisePlane& p) {
  const int64_t sw = p.stride_w;
  const int64_t chunks = (p.out_w + 15) / 16;
  if ((sw != 1 && sw != 2) || chunks > kMaxChunks || p.kernel_w > kMaxKernelW || p.kernel_h > kMaxKernelH) {
    return depthwise_plane_portable(p);
  }
  // For chunk c and tap column kw: the input offset of the chunk's first lane,
  // and the masks of the (one or two) loads that cover its 16 lanes.
  int64_t start[kMaxChunks][kMaxKernelW];
  __mmask16 mask_lo[kMaxChunks][kMaxKernelW], mask_hi[kMaxChunks][kMaxKernelW];
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t lanes = std::min<int64_t>(16, p.out_w - c * 16);
    for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
      const int64_t s0 = c * 16 * sw - p.pad_left + kw * p.dilation_w;
      start[c][kw] = s0;
      // Element j of the loaded span is input column s0 + j: valid for j in [-s0, in_w - s0).
      const int64_t span = sw == 1 ? lanes : 2 * lanes - 1;
      const int64_t lo = -s0, hi = std::min(span, p.in_w - s0);
      mask_lo[c][kw] = lane_range(lo, hi);
      mask_hi[c][kw] = sw == 1 ? 0 : lane_range(lo - 16, hi - 16);
    }
  }
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512 bias = _mm512_set1_ps(p.bias);
  const __m512 clamp_lo = _mm512_set1_ps(p.clamp_lo), clamp_hi = _mm512_set1_ps(p.clamp_hi);
  const float* rows[kMaxKernelH];
  const float* taps[kMaxKernelH];
  for (int64_t oh = 0; oh < p.out_h; ++oh) {
    float* y = p.y + oh * p.out_w;
    int64_t valid_rows = 0;
    for (int64_t kh = 0; kh < p.kernel_h; ++kh) {
      const int64_t ih = oh * p.stride_h - p.pad_top + kh * p.dilation_h;
      if (ih < 0 || ih >= p.in_h) continue;
      rows[valid_rows] = p.x + ih * p.in_w;
      taps[valid_rows++] = p.w + kh * p.kernel_w;
    }
    for (int64_t c = 0; c < chunks; ++c) {
      __m512 acc = bias;
      for (int64_t r = 0; r < valid_rows; ++r) {
        for (int64_t kw = 0; kw < p.kernel_w; ++kw) {
          // Masked-off lanes are never read, so the address may point before or past the row.
          const float* at = rows[r] + start[c][kw];
          __m512 xv = _mm512_maskz_loadu_ps(mask_lo[c][kw], at);
          if (sw == 2) xv = _mm512_permutex2var_ps(xv, even, _mm512_maskz_loadu_ps(mask_hi[c][kw], at + 16));
          acc = _mm512_fmadd_ps(_mm512_set1_ps(taps[r][kw]), xv, acc);
        }
      }
      acc = _mm512_min_ps(clamp_hi, _mm512_max_ps(clamp_lo, acc));  // operand order lets NaN through
      const int64_t lanes = std::min<int64_t>(16, p.out_w - c * 16);
      _mm512_mask_storeu_ps(y + c * 16, lane_range(0, lanes), acc);
    }
  }
}

}  // namespace tessera::native
