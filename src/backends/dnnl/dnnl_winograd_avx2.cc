// The AVX2 + FMA kernels of Winograd F(4x4, 3x3) on nChw8c (plan and
// contract: dnnl_winograd.cc, dnnl_internal.h). Compiled with -mavx2 -mfma;
// run only where winograd_plan found the CPU has them.
//
// One run goes through the output tiles in chunks; for each chunk:
//   1. input transform: each 6x6 input tile of each block of 8 channels
//      becomes 36 vectors B^T d B (one per transform point), stored
//      V[point][channel block][tile][8];
//   2. 36 products, one per point: M[point] = V[point] x U[point], the tiles
//      the rows and the output channels the columns, in register tiles of
//      6 tiles x 16 channels (12 accumulators);
//   3. output transform: each tile's 36 product vectors become the 4x4
//      outputs A^T m A, plus bias and post-ops, stored into nChw8c.
// In nChw8c each pixel is 8 contiguous channels, so every transform works on
// whole vectors, one vector per pixel.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "backends/dnnl/dnnl_internal.h"
#include "backends/dnnl/dnnl_winograd_body.h"

namespace tessera::dnnl_backend {
namespace {

/// The vector operations the shared transforms use (dnnl_winograd_body.h).
struct Ops {
  using V = __m256;
  static V set1(float a) { return _mm256_set1_ps(a); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }
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
  __m256 d[6][6];
  const bool inside = h0 >= 0 && w0 >= 0 && h0 + 6 <= p.in[0] && w0 + 6 <= p.in[1];
  for (int i = 0; i < 6; ++i) {
    const int64_t h = h0 + i;
    const float* line = image + h * p.src_strides[2];
    for (int j = 0; j < 6; ++j) {
      const int64_t w = w0 + j;
      d[i][j] = inside || (h >= 0 && h < p.in[0] && w >= 0 && w < p.in[1]) ? _mm256_loadu_ps(line + w * 8)
                                                                          : _mm256_setzero_ps();
    }
  }
  __m256 rows[6][6];  // d B, row by row
  for (int i = 0; i < 6; ++i) winograd_body::input_transform<Ops>(d[i], rows[i]);
  float* out = v + cb * g.block_stride + local * 8;
  for (int c = 0; c < 6; ++c) {
    const __m256 column[6] = {rows[0][c], rows[1][c], rows[2][c], rows[3][c], rows[4][c], rows[5][c]};
    __m256 r[6];
    winograd_body::input_transform<Ops>(column, r);
    for (int i = 0; i < 6; ++i) _mm256_storeu_ps(out + (i * 6 + c) * g.point_in_stride, r[i]);
  }
}

/// Step 2's register tile: R tiles (rows) x 16 output channels over every input channel.
template <int R>
void multiply_tile(const float* a, int64_t block_stride, int64_t in_blocks, const float* b, float* m0, float* m1) {
  // The unroll pragmas keep the accumulators in registers (without them GCC 12 spills them each step).
  __m256 acc0[R], acc1[R];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  for (int64_t cb = 0; cb < in_blocks; ++cb) {
    const float* ap = a + cb * block_stride;
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
      const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
      b += 16;
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m256 x = _mm256_broadcast_ss(ap + r * 8 + c);
        acc0[r] = _mm256_fmadd_ps(x, b0, acc0[r]);
        acc1[r] = _mm256_fmadd_ps(x, b1, acc1[r]);
      }
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) _mm256_storeu_ps(m0 + r * 8, acc0[r]);
  if (m1) {
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(m1 + r * 8, acc1[r]);
  }
}

void multiply_step(const Geometry& g, const float* v, const float* weights, float* m, int64_t task, int64_t count) {
  const WinogradPlan& p = g.plan;
  const int64_t point = task / g.num_panels, panel = task % g.num_panels;
  const float* a = v + point * g.point_in_stride;
  const float* b = weights + (point * g.num_panels + panel) * p.in_blocks * 8 * 16;
  float* m0 = m + point * g.point_out_stride + 2 * panel * g.block_stride;
  float* m1 = 2 * panel + 1 < p.out_blocks ? m0 + g.block_stride : nullptr;
  for (int64_t t = 0; t < count; t += 6) {
    const int64_t o = t * 8;
    float* second = m1 ? m1 + o : nullptr;
    switch (std::min<int64_t>(6, count - t)) {
      case 6: multiply_tile<6>(a + o, g.block_stride, p.in_blocks, b, m0 + o, second); break;
      case 5: multiply_tile<5>(a + o, g.block_stride, p.in_blocks, b, m0 + o, second); break;
      case 4: multiply_tile<4>(a + o, g.block_stride, p.in_blocks, b, m0 + o, second); break;
      case 3: multiply_tile<3>(a + o, g.block_stride, p.in_blocks, b, m0 + o, second); break;
      case 2: multiply_tile<2>(a + o, g.block_stride, p.in_blocks, b, m0 + o, second); break;
      default: multiply_tile<1>(a + o, g.block_stride, p.in_blocks, b, m0 + o, second); break;
    }
  }
}

/// Step 3 for tile `tile` (`local` within the chunk) and output channel block `ob`.
void output_step(const Geometry& g, const float* m, const float* bias, float* dst, int64_t tile, int64_t local,
                      int64_t ob) {
  const WinogradPlan& p = g.plan;
  const float* in = m + ob * g.block_stride + local * 8;
  __m256 rows[6][4];  // m A, row by row
  for (int i = 0; i < 6; ++i) {
    __m256 row[6];
    for (int j = 0; j < 6; ++j) row[j] = _mm256_loadu_ps(in + (i * 6 + j) * g.point_out_stride);
    winograd_body::output_transform<Ops>(row, rows[i]);
  }
  const int64_t real = std::min<int64_t>(8, p.out_channels - ob * 8);  // channels of this block that exist
  const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(real)),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const __m256 keep = _mm256_castsi256_ps(lanes);
  const __m256 b = bias ? _mm256_maskload_ps(bias + ob * 8, lanes) : _mm256_setzero_ps();
  const int64_t n = tile / g.tiles_per_image;
  const int64_t ty = (tile % g.tiles_per_image) / p.tiles[1];
  const int64_t tx = tile % p.tiles[1];
  float* image = dst + n * p.dst_strides[0] + ob * p.dst_strides[1];
  for (int j = 0; j < 4; ++j) {
    const __m256 column[6] = {rows[0][j], rows[1][j], rows[2][j], rows[3][j], rows[4][j], rows[5][j]};
    __m256 y[4];
    winograd_body::output_transform<Ops>(column, y);
    const int64_t w = tx * 4 + j;
    if (w >= p.out[1]) break;
    for (int i = 0; i < 4; ++i) {
      const int64_t h = ty * 4 + i;
      if (h >= p.out[0]) break;
      float* at = image + h * p.dst_strides[2] + w * 8;
      __m256 x = _mm256_add_ps(y[i], b);
      for (const WinogradPostOp& op : p.post_ops) {
        switch (op.kind) {
          case WinogradPostOp::Kind::kRelu: {
            // x > 0 ? x : alpha x; a NaN takes the second branch and stays NaN.
            const __m256 positive = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ);
            x = _mm256_blendv_ps(_mm256_mul_ps(x, _mm256_set1_ps(op.alpha)), x, positive);
            break;
          }
          case WinogradPostOp::Kind::kClip:
            // max and min return their second operand when one is NaN: x goes second.
            x = _mm256_min_ps(_mm256_set1_ps(op.beta), _mm256_max_ps(_mm256_set1_ps(op.alpha), x));
            break;
          case WinogradPostOp::Kind::kSum:
            x = _mm256_fmadd_ps(_mm256_set1_ps(op.alpha), _mm256_loadu_ps(at), x);
            break;
        }
      }
      _mm256_storeu_ps(at, _mm256_and_ps(x, keep));  // the block's padding channels stay 0
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

void run_winograd_avx2(const WinogradPlan& plan, const float* src, const float* weights, const float* bias, float* dst,
                       float* scratch) {
  winograd_body::run_chunks<Kernels>(plan, src, weights, bias, dst, scratch);
}

}  // namespace tessera::dnnl_backend
