// Native Winograd F(4x4, 3x3) for float32 3x3 stride-1 convolutions on plain
// NCHW (contract in nn_internal.h, winograd_conv). A 4x4 output tile comes
// from a 6x6 input tile with 36 multiplies per input channel and output
// channel instead of 144 (Lavin and Gray, "Fast Algorithms for Convolutional
// Neural Networks", 2015); the rest are additions in the transforms.
//
// The tiles go in chunks of whole tile rows (one row of tiles of one image is
// tw tiles side by side); for each chunk:
//   1. input transform, per input channel: the six input rows of each tile
//      row, zero-padded and split into four column phases (column 4j + b of
//      a padded row is phase b % 4 at j + b / 4), so that every step is one
//      loop over the chunk's tiles: V[point][channel][tile] = B^T d B;
//   2. 36 products, one per point, on the packed GEMM:
//      M[point] (out channels x tiles) = U[point] (out x in channels) x V[point];
//   3. output transform, per output channel: A^T m A, plus bias and the fused
//      clamp, written into the output rows (the tiles' columns interleaved
//      back).
// U = G g G^T is computed once per weights (winograd_weights), in double.
// Rounding: within a few units in the last place of the terms' magnitudes.
// An Inf or NaN in a tile would become NaN across the tile's outputs (numpy
// and PyTorch give it only to the outputs whose window reads it): the input
// transform notices one as it copies the rows, and the convolution is then run
// directly.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "backends/native/cpu_features.h"
#include "backends/native/kernels/nn_internal.h"
#include "backends/native/kernels/winograd_f4x3.h"

#define TESSERA_WINOGRAD_NAMESPACE baseline
#include "backends/native/kernels/nn_conv_winograd_body.h"
#undef TESSERA_WINOGRAD_NAMESPACE

namespace tessera::native {
namespace {

/// The scratch of one chunk (its V and M) stays within about this many bytes; each chunk reads all
/// 36 packed weight matrices once, so larger chunks read them less often.
constexpr int64_t kChunkBytes = int64_t{8} << 20;

/// The transforms for this CPU (nn_conv_winograd_body.h, compiled once per ISA).
struct Transforms {
  decltype(&baseline::winograd_input) input;
  decltype(&baseline::winograd_output) output;
};

const Transforms& transforms() {
  static const Transforms best = cpu_features().avx512   ? Transforms{avx512::winograd_input, avx512::winograd_output}
                                 : cpu_features().avx2_fma ? Transforms{avx2::winograd_input, avx2::winograd_output}
                                                           : Transforms{baseline::winograd_input, baseline::winograd_output};
  return best;
}

}  // namespace

bool winograd_conv_worthwhile(const WinogradConv& s) {
  if (s.batch < 1 || s.in_channels < 1 || s.out_channels < 1 || s.out_h < 1 || s.out_w < 1) return false;
  if (s.pad_top < 0 || s.pad_left < 0 || s.pad_bottom < 0 || s.pad_right < 0) return false;
  if (s.out_h != s.in_h + s.pad_top + s.pad_bottom - 2 || s.out_w != s.in_w + s.pad_left + s.pad_right - 2) return false;
  // The transforms cost a few operations per input and output value; the products' savings grow with
  // the channels on the other side.
  if (s.in_channels < kWinogradMinChannels || s.out_channels < kWinogradMinChannels) return false;
  // Enough tiles that the products' columns (tiles) fill the microkernel, and tiles that are mostly
  // inside the output: 36 multiplies a tile against 9 an output for the direct convolution.
  // Each chunk of tiles reads all 36 transformed weight matrices (four times the weights): a 512 x 512
  // convolution on nine tiles read 36 MB for them and ran slower than directly, so the tiles must also
  // grow with the weights (and so does the memory the transform is worth keeping).
  const int64_t th = (s.out_h + 3) / 4, tw = (s.out_w + 3) / 4;
  const int64_t tiles = s.batch * th * tw;
  if (tiles < std::max(kWinogradMinTiles, s.in_channels * s.out_channels / kWinogradWeightsPerTile)) return false;
  return 36 * th * tw * 2 <= 9 * s.out_h * s.out_w;  // at most half the direct multiplies
}

WinogradWeights winograd_weights(const GemmMicrokernel& kernel, const float* w, int64_t out_channels,
                                 int64_t in_channels) {
  // Written straight into pack_gemm_a's layout (per K-block of kGemmBlockK input channels, panels of mr
  // output channels, mr values per input channel): a plain copy of U first doubled the fresh memory the
  // first run maps (its page faults were most of that run's cost in a VM).
  const int64_t mr = kernel.mr, padded = (out_channels + mr - 1) / mr * mr, size = padded * in_channels;
  WinogradWeights u;
  u.storage.resize(static_cast<size_t>(36 * size));  // every element written below
  u.points.resize(36);
  for (int64_t p = 0; p < 36; ++p) {
    PackedMatrix& matrix = u.points[static_cast<size_t>(p)];
    matrix.kernel = &kernel;
    matrix.width = out_channels;
    matrix.depth = in_channels;
    matrix.padded_width = padded;
    matrix.shared = u.storage.data() + p * size;
  }
  // One panel (mr output channels x one K-block) at a time: its filters' 36 points are made in a buffer
  // that stays in cache, then written to the 36 matrices one after another, each front to back. Written
  // straight to the 36 matrices, the 36 interleaved streams of fresh lines outran the prefetchers: about
  // 1400 cycles a filter.
  std::vector<float> filters(static_cast<size_t>(kGemmBlockK * mr * 36));  // [position in the panel][point]
  for (int64_t k0 = 0; k0 < in_channels; k0 += kGemmBlockK) {
    const int64_t kc = std::min(kGemmBlockK, in_channels - k0), panel_size = kc * mr;
    for (int64_t o0 = 0; o0 < padded; o0 += mr) {
      for (int64_t c = k0; c < k0 + kc; ++c) {
        for (int64_t o = o0; o < o0 + mr; ++o) {
          float* out = filters.data() + ((c - k0) * mr + (o - o0)) * 36;
          if (o >= out_channels) {
            std::fill(out, out + 36, 0.0f);  // a padding row of the last panel
            continue;
          }
          double point[36];
          winograd_f4x3_weights(w + (o * in_channels + c) * 9, point);
          for (int p = 0; p < 36; ++p) out[p] = static_cast<float>(point[p]);
        }
      }
      for (int64_t p = 0; p < 36; ++p) {  // panel o0 / mr of K-block k0 in each matrix, front to back
        float* __restrict dst = u.storage.data() + p * size + k0 * padded + o0 * kc;
        const float* __restrict src = filters.data() + p;
        for (int64_t at = 0; at < panel_size; ++at) dst[at] = src[at * 36];
      }
    }
  }
  return u;
}

bool winograd_conv(const WinogradConv& s, const GemmMicrokernel& kernel, const WinogradWeights& u, const float* x,
                   const float* bias, float* y, ThreadPool& pool, const GemmClamp* clamp) {
  const WinogradTiles g{s, (s.out_h + 3) / 4, (s.out_w + 3) / 4};
  const Transforms& transform = transforms();
  const int64_t total_rows = s.batch * g.th;
  const int64_t len = g.tw + 1;  // columns per tile row (nn_internal.h: the last a dummy)
  const int64_t row_bytes = 36 * len * (s.in_channels + s.out_channels) * static_cast<int64_t>(sizeof(float));
  int64_t chunk_rows = std::clamp<int64_t>(kChunkBytes / row_bytes, 1, total_rows);
  // Even chunks: the last one no smaller than the others by more than a row.
  const int64_t chunks = (total_rows + chunk_rows - 1) / chunk_rows;
  chunk_rows = (total_rows + chunks - 1) / chunks;
  thread_local std::vector<float, UninitializedAllocator<float>> scratch;
  const size_t scratch_floats = static_cast<size_t>(36 * chunk_rows * len * (s.in_channels + s.out_channels));
  if (scratch.size() < scratch_floats) scratch.resize(scratch_floats);
  float* v = scratch.data();
  float* m = v + 36 * chunk_rows * len * s.in_channels;
  for (int64_t row0 = 0; row0 < total_rows; row0 += chunk_rows) {
    const int64_t rows = std::min(chunk_rows, total_rows - row0);
    const int64_t tiles = rows * len;
    std::atomic<bool> finite{true};
    pool.parallel_for(s.in_channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end && finite.load(std::memory_order_relaxed); ++c) {
        if (!transform.input(g, x, c, row0, rows, v)) finite.store(false, std::memory_order_relaxed);
      }
    });
    if (!finite.load()) return false;
    pool.parallel_for(36, 1, [&](int64_t begin, int64_t end) {
      for (int64_t point = begin; point < end; ++point) {
        GemmA a{&u.points[static_cast<size_t>(point)], {}};
        GemmB b;
        b.ref = {v + point * s.in_channels * tiles, tiles, 1};
        gemm_f32(kernel, s.out_channels, tiles, s.in_channels, a, b, m + point * s.out_channels * tiles, tiles, false,
                 nullptr, nullptr);
      }
    });
    pool.parallel_for(s.out_channels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) transform.output(g, m, o, row0, rows, bias, clamp, y);
    });
  }
  return true;
}

}  // namespace tessera::native
