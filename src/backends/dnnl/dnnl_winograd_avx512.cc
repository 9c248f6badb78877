// The AVX-512 kernels of Winograd F(4x4, 3x3) on vectors of 16 channels
// (nChw16c, or channels-last, which oneDNN's brgemm convolutions take on
// AVX-512); plan and contract: dnnl_winograd.cc,
// dnnl_internal.h. Compiled with -mavx512f; run only where winograd_plan found
// the CPU has it.
//
// The same three steps per chunk of tiles as the AVX2 kernels
// (dnnl_winograd_avx2.cc), one 16-channel vector per pixel:
//   1. input transform: V[point][channel block][tile][16];
//   2. 36 products M[point] = V[point] x U[point] in register tiles of
//      12 tiles x 32 output channels (24 accumulators);
//   3. output transform, bias and post-ops, stored into the destination.
// A pixel's block of 16 channels is at src_strides[1] * block from the
// previous one, and pixels are src_strides[3] apart (16 in nChw16c, the
// channel count in channels-last).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "backends/dnnl/dnnl_internal.h"
#include "backends/dnnl/dnnl_winograd_body.h"

namespace tessera::dnnl_backend {
namespace {

constexpr int kBlock = 16;
constexpr int kRows = 12;  // tiles per register tile

/// The vector operations the shared transforms use (dnnl_winograd_body.h).
struct Ops {
  using V = __m512;
  static V set1(float a) { return _mm512_set1_ps(a); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
};
using winograd_body::Geometry;

/// Step 1 for tile `tile` (global index; `local` within the chunk) and input channel block `cb`.
void input_step(const Geometry& g, const float* src, float* v, int64_t tile, int64_t local, int64_t cb) {
  const WinogradPlan& p = g.plan;
  const int64_t n = tile / g.tiles_per_image;
  const int64_t ty = (tile % g.tiles_per_image) / p.tiles[1];
  const int64_t tx = tile % p.tiles[1];
  const int64_t h0 = ty * 4 - p.pad[0], w0 = tx * 4 - p.pad[1];
  const float* image = src + n * p.src_strides[0] + cb * p.src_strides[1];
  const int64_t pixel = p.src_strides[3];
  // The channels of this block that exist: in channels-last the lanes past them are the next pixel's
  // (or past the buffer), so they are read as 0 (as a blocked layout's padding is).
  const __mmask16 lanes = static_cast<__mmask16>((1u << std::min<int64_t>(kBlock, p.in_channels - cb * kBlock)) - 1);
  __m512 d[6][6];
  const bool inside = h0 >= 0 && w0 >= 0 && h0 + 6 <= p.in[0] && w0 + 6 <= p.in[1];
  for (int i = 0; i < 6; ++i) {
    const int64_t h = h0 + i;
    const float* line = image + h * p.src_strides[2];
    for (int j = 0; j < 6; ++j) {
      const int64_t w = w0 + j;
      d[i][j] = inside || (h >= 0 && h < p.in[0] && w >= 0 && w < p.in[1]) ? _mm512_maskz_loadu_ps(lanes, line + w * pixel)
                                                                          : _mm512_setzero_ps();
    }
  }
  __m512 rows[6][6];  // d B, row by row
  for (int i = 0; i < 6; ++i) winograd_body::input_transform<Ops>(d[i], rows[i]);
  float* out = v + cb * g.block_stride + local * kBlock;
  for (int c = 0; c < 6; ++c) {
    const __m512 column[6] = {rows[0][c], rows[1][c], rows[2][c], rows[3][c], rows[4][c], rows[5][c]};
    __m512 r[6];
    winograd_body::input_transform<Ops>(column, r);
    for (int i = 0; i < 6; ++i) _mm512_storeu_ps(out + (i * 6 + c) * g.point_in_stride, r[i]);
  }
}

/// Step 2's register tile: R tiles (rows) x 32 output channels over every input channel.
template <int R>
void multiply_tile(const float* a, int64_t block_stride, int64_t in_blocks, const float* b, float* m0, float* m1) {
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t cb = 0; cb < in_blocks; ++cb) {
    const float* ap = a + cb * block_stride;
#pragma GCC unroll 4
    for (int c = 0; c < kBlock; ++c) {
      const __m512 b0 = _mm512_load_ps(b), b1 = _mm512_load_ps(b + kBlock);
      b += 2 * kBlock;
#pragma GCC unroll 12
      for (int r = 0; r < R; ++r) {
        const __m512 x = _mm512_set1_ps(ap[r * kBlock + c]);
        acc0[r] = _mm512_fmadd_ps(x, b0, acc0[r]);
        acc1[r] = _mm512_fmadd_ps(x, b1, acc1[r]);
      }
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(m0 + r * kBlock, acc0[r]);
  if (m1) {
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) _mm512_storeu_ps(m1 + r * kBlock, acc1[r]);
  }
}

template <int R>
void multiply_rows(const float* a, int64_t block_stride, int64_t in_blocks, const float* b, float* m0, float* m1,
                   int64_t rows) {
  if constexpr (R > 1) {
    if (rows < R) return multiply_rows<R - 1>(a, block_stride, in_blocks, b, m0, m1, rows);
  }
  multiply_tile<R>(a, block_stride, in_blocks, b, m0, m1);
}

void multiply_step(const Geometry& g, const float* v, const float* weights, float* m, int64_t task, int64_t count) {
  const WinogradPlan& p = g.plan;
  const int64_t point = task / g.num_panels, panel = task % g.num_panels;
  const float* a = v + point * g.point_in_stride;
  const float* b = weights + (point * g.num_panels + panel) * p.in_blocks * kBlock * 2 * kBlock;
  float* m0 = m + point * g.point_out_stride + 2 * panel * g.block_stride;
  float* m1 = 2 * panel + 1 < p.out_blocks ? m0 + g.block_stride : nullptr;
  for (int64_t t = 0; t < count; t += kRows) {
    const int64_t o = t * kBlock;
    multiply_rows<kRows>(a + o, g.block_stride, p.in_blocks, b, m0 + o, m1 ? m1 + o : nullptr,
                         std::min<int64_t>(kRows, count - t));
  }
}

/// Step 3 for tile `tile` (`local` within the chunk) and output channel block `ob`.
void output_step(const Geometry& g, const float* m, const float* bias, float* dst, int64_t tile, int64_t local,
                      int64_t ob) {
  const WinogradPlan& p = g.plan;
  const float* in = m + ob * g.block_stride + local * kBlock;
  __m512 rows[6][4];  // m A, row by row
  for (int i = 0; i < 6; ++i) {
    __m512 row[6];
    for (int j = 0; j < 6; ++j) row[j] = _mm512_loadu_ps(in + (i * 6 + j) * g.point_out_stride);
    winograd_body::output_transform<Ops>(row, rows[i]);
  }
  const int64_t real = std::min<int64_t>(kBlock, p.out_channels - ob * kBlock);  // channels of this block that exist
  const __mmask16 keep = static_cast<__mmask16>((1u << real) - 1);
  // A blocked layout's padding channels are written 0; in channels-last the lanes past the last channel
  // are the next pixel's, and are not written.
  const bool padded = p.dst_strides[3] == kBlock;
  const __m512 b = bias ? _mm512_maskz_loadu_ps(keep, bias + ob * kBlock) : _mm512_setzero_ps();
  const int64_t n = tile / g.tiles_per_image;
  const int64_t ty = (tile % g.tiles_per_image) / p.tiles[1];
  const int64_t tx = tile % p.tiles[1];
  float* image = dst + n * p.dst_strides[0] + ob * p.dst_strides[1];
  const int64_t pixel = p.dst_strides[3];
  for (int j = 0; j < 4; ++j) {
    const __m512 column[6] = {rows[0][j], rows[1][j], rows[2][j], rows[3][j], rows[4][j], rows[5][j]};
    __m512 y[4];
    winograd_body::output_transform<Ops>(column, y);
    const int64_t w = tx * 4 + j;
    if (w >= p.out[1]) break;
    for (int i = 0; i < 4; ++i) {
      const int64_t h = ty * 4 + i;
      if (h >= p.out[0]) break;
      float* at = image + h * p.dst_strides[2] + w * pixel;
      __m512 x = _mm512_add_ps(y[i], b);
      for (const WinogradPostOp& op : p.post_ops) {
        switch (op.kind) {
          case WinogradPostOp::Kind::kRelu: {
            // x > 0 ? x : alpha x; a NaN takes the second branch and stays NaN.
            const __mmask16 positive = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ);
            x = _mm512_mask_blend_ps(positive, _mm512_mul_ps(x, _mm512_set1_ps(op.alpha)), x);
            break;
          }
          case WinogradPostOp::Kind::kClip:
            // max and min return their second operand when one is NaN: x goes second.
            x = _mm512_min_ps(_mm512_set1_ps(op.beta), _mm512_max_ps(_mm512_set1_ps(op.alpha), x));
            break;
          case WinogradPostOp::Kind::kSum:
            x = _mm512_fmadd_ps(_mm512_set1_ps(op.alpha), _mm512_maskz_loadu_ps(keep, at), x);
            break;
        }
      }
      if (padded) {
        _mm512_storeu_ps(at, _mm512_maskz_mov_ps(keep, x));
      } else {
        _mm512_mask_storeu_ps(at, keep, x);
      }
    }
  }
}

/// The steps run_chunks takes (dnnl_winograd_body.h).
struct Kernels {
  static constexpr auto input = &input_step;
  static constexpr auto product = &multiply_step;
  static constexpr auto output = &output_step;
};

}  // namespace

void run_winograd_avx512(const WinogradPlan& plan, const float* src, const float* weights, const float* bias,
                         float* dst, float* scratch) {
  winograd_body::run_chunks<Kernels>(plan, src, weights, bias, dst, scratch);
}

}  // namespace tessera::dnnl_backend
