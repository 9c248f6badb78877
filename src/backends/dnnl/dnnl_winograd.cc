// Winograd F(4x4, 3x3) for float32 3x3 stride-1 convolutions on nChw8c (AVX2),
// and on nChw16c or channels-last (AVX-512): the plan (which steps it takes,
// checked like any payload) and the weight transform. Contract in
// dnnl_internal.h; the kernels are in dnnl_winograd_avx2.cc and
// dnnl_winograd_avx512.cc.
//
// oneDNN 2.6 has Winograd only with AVX-512; below it a 3x3 convolution runs
// directly, 9 multiply-adds per input channel and output. With AVX-512, oneDNN's
// Winograd lays its weights out for each shape's tiling, so a region of open
// dims does not use it (dnnl_tuning.cc) and this kernel, whose weights every
// shape shares, is the Winograd such regions have. F(4x4, 3x3) makes a
// 4x4 output tile from a 6x6 input tile with 36 (2.25 per output) instead,
// the rest being additions in the transforms (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2015). Whether it beats the
// direct kernel on a layer is measured when the region is compiled
// (choose_convolution_algorithm). Its rounding differs from a direct sum's by
// a few units in the last place of the larger terms; like oneDNN's Winograd
// it is exact only for finite inputs (an Inf in a tile becomes NaN across it).
#include <algorithm>

#include "backends/dnnl/dnnl_internal.h"
#include "backends/native/cpu_features.h"
#include "backends/native/kernels/winograd_f4x3.h"

namespace tessera::dnnl_backend {
namespace {

/// The scratch of one chunk of tiles (their transformed inputs and products)
/// stays within about this many bytes. Each chunk reads every point's
/// transformed weights once, so larger chunks read them less often: on Zen 3
/// at one thread, 1 MiB -> 16 MiB took VGG-11 from 98 to 82 ms and ResNet-50
/// from 79 to 75 (64 MiB: no better). With AVX-512 (16 channels a vector) 4 MiB: a ResNet-18 trunk at
/// 448x448 on Zen 5 ran as fast as with 16 (49-53 ms against 49-55 at one thread; 2 MiB: 52-60), with
/// 12 MiB less scratch.
constexpr int64_t kChunkBytes = int64_t{16} << 20;
constexpr int64_t kWideChunkBytes = int64_t{4} << 20;
/// The weights' transform is 4x the weights; beyond this many floats the step runs directly.
constexpr int64_t kMaxWeightFloats = int64_t{1} << 31;
int64_t panels(int64_t out_blocks) { return (out_blocks + 1) / 2; }  // two output blocks each
/// Tiles of a register tile of the kernels: each chunk is a multiple of it.
int64_t register_rows(int64_t block) { return block == 16 ? 12 : 6; }

/// A 4-D float32 layout as vectors of `block` channels: nChw`block`c, or, for 16, channels-last (acdb;
/// the last vector's lanes past the channels belong to the next pixel, which the kernel neither reads
/// nor writes); the strides in elements between images, blocks, rows and pixels.
bool channel_vectors(const memory::desc& desc, int64_t block, int64_t strides[4]) {
  int64_t blocked = 0;
  if (channel_blocked(desc, blocked, strides)) return blocked == block;
  const dnnl_memory_desc_t& md = desc.data;
  if (block != 16 || md.format_kind != dnnl_blocked || md.ndims != 4 || md.offset0 != 0 || md.data_type != dnnl_f32) {
    return false;
  }
  const dnnl_blocking_desc_t& b = md.format_desc.blocking;
  const int64_t c = md.dims[1], h = md.dims[2], w = md.dims[3];
  if (b.inner_nblks != 0 || c < 1 || md.padded_dims[1] != c || b.strides[1] != 1 || b.strides[3] != c ||
      b.strides[2] != w * c || b.strides[0] != h * w * c) {
    return false;
  }
  strides[0] = b.strides[0];
  strides[1] = 16;
  strides[2] = b.strides[2];
  strides[3] = b.strides[3];
  return true;
}

}  // namespace

bool winograd_available() { return native::cpu_features().avx2_fma; }

int64_t WinogradPlan::weight_floats() const { return 36 * in_blocks * block * panels(out_blocks) * 2 * block; }

int64_t WinogradPlan::scratch_bytes() const {
  return 36 * chunk * block * (in_blocks + out_blocks) * static_cast<int64_t>(sizeof(float));
}

std::optional<WinogradPlan> winograd_plan(const Step& step, const std::vector<memory::desc>& roles) {
  if (step.kind != StepKind::kConvolution || step.algorithm != kTesseraWinograd || !winograd_available()) {
    return std::nullopt;
  }
  if (roles.size() != 3 && roles.size() != 4) return std::nullopt;
  if (step.ints.size() != 8) return std::nullopt;  // strides, dilations (from 0), begin pads, end pads
  WinogradPlan p;
  // 8 channels a vector on nChw8c (AVX2's kernel, which AVX-512 CPUs run too: an artifact compiled on
  // AVX2), 16 on nChw16c or channels-last (oneDNN's layouts with AVX-512: its brgemm convolutions take
  // channels-last) where the CPU has AVX-512.
  bool found = false;
  for (int64_t block : {int64_t{8}, int64_t{16}}) {
    if (block == 16 && !native::cpu_features().avx512) break;
    if (channel_vectors(roles[0], block, p.src_strides) && channel_vectors(roles.back(), block, p.dst_strides)) {
      p.block = block;
      found = true;
      break;
    }
  }
  if (!found) return std::nullopt;
  const dnnl_memory_desc_t& src = roles[0].data;
  const dnnl_memory_desc_t& dst = roles.back().data;
  const memory::dims w = roles[1].dims();
  if (roles[1].data_type() != memory::data_type::f32 || w.size() != 4 || w[2] != 3 || w[3] != 3) return std::nullopt;
  if (w[0] != dst.dims[1] || w[1] != src.dims[1] || src.dims[0] != dst.dims[0]) return std::nullopt;
  if (roles.size() == 4 && (roles[2].data_type() != memory::data_type::f32 || !is_plain(roles[2]) ||
                            roles[2].dims() != memory::dims{w[0]})) {
    return std::nullopt;
  }
  p.batch = src.dims[0];
  p.in_blocks = (src.padded_dims[1] + p.block - 1) / p.block;  // (channels-last: the last one partly)
  p.out_blocks = (dst.padded_dims[1] + p.block - 1) / p.block;
  p.out_channels = dst.dims[1];
  p.in_channels = src.dims[1];
  if (p.batch < 1 || p.in_channels < 1 || p.out_channels < 1) return std::nullopt;  // nothing to compute: oneDNN's
  constexpr int64_t kLimit = int64_t{1} << 30;
  for (int d = 0; d < 2; ++d) {
    if (step.ints[static_cast<size_t>(d)] != 1 || step.ints[static_cast<size_t>(2 + d)] != 0) return std::nullopt;
    p.in[d] = src.dims[2 + d];
    p.out[d] = dst.dims[2 + d];
    p.pad[d] = step.ints[static_cast<size_t>(4 + d)];
    const int64_t pad_end = step.ints[static_cast<size_t>(6 + d)];
    // A payload is untrusted: the output must be exactly what the pads give.
    for (int64_t v : {p.pad[d], pad_end, p.in[d], p.out[d]}) {
      if (v < 0 || v > kLimit) return std::nullopt;
    }
    if (p.out[d] < 1 || p.out[d] != p.in[d] + p.pad[d] + pad_end - 2) return std::nullopt;
    p.tiles[d] = (p.out[d] + 3) / 4;
  }
  for (const PostOp& post : step.post_ops) {
    WinogradPostOp op;
    if (post.kind == PostOpKind::kEltwise && post.algorithm == static_cast<int32_t>(dnnl::algorithm::eltwise_relu)) {
      op.kind = WinogradPostOp::Kind::kRelu;
      op.alpha = post.alpha;
    } else if (post.kind == PostOpKind::kEltwise &&
               (post.algorithm == static_cast<int32_t>(dnnl::algorithm::eltwise_clip) ||
                post.algorithm == static_cast<int32_t>(dnnl::algorithm::eltwise_clip_v2))) {
      op.kind = WinogradPostOp::Kind::kClip;
      op.alpha = post.alpha;
      op.beta = post.beta;
    } else if (post.kind == PostOpKind::kSum && post.beta == 0 &&
               (post.algorithm == 0 || post.algorithm == static_cast<int32_t>(dnnl_f32))) {
      op.kind = WinogradPostOp::Kind::kSum;
      op.alpha = post.alpha;
    } else {
      return std::nullopt;
    }
    p.post_ops.push_back(op);
  }
  const int64_t tiles = p.batch * p.tiles[0] * p.tiles[1];
  const int64_t tile_bytes = 36 * p.block * (p.in_blocks + p.out_blocks) * static_cast<int64_t>(sizeof(float));
  const int64_t rows = register_rows(p.block);
  const int64_t chunk_bytes = p.block == 16 ? kWideChunkBytes : kChunkBytes;
  p.chunk = std::clamp<int64_t>(chunk_bytes / tile_bytes / rows * rows, 2 * rows, (tiles + rows - 1) / rows * rows);
  if (p.weight_floats() > kMaxWeightFloats) return std::nullopt;
  return p;
}

void write_winograd_weights(const WinogradPlan& plan, const float* plain, float* out) {
  // Layout: [36 points][panel of 2 x block output channels][input channel, padded to blocks][2 x block].
  // The output channels of a panel are transformed together, so each point's writes are one run.
  const int64_t in_padded = plan.in_blocks * plan.block, width = 2 * plan.block;
  const int64_t num_panels = panels(plan.out_blocks);
  for (int64_t panel = 0; panel < num_panels; ++panel) {
    const int64_t first = panel * width, count = std::min<int64_t>(width, plan.out_channels - first);
    for (int64_t i = 0; i < plan.in_channels; ++i) {
      double u[36][32] = {};
      for (int64_t lane = 0; lane < count; ++lane) {
        double point[36];  // U = G g G^T
        native::winograd_f4x3_weights(plain + ((first + lane) * plan.in_channels + i) * 9, point);
        for (int p = 0; p < 36; ++p) u[p][lane] = point[p];
      }
      for (int64_t point = 0; point < 36; ++point) {
        float* run = out + ((point * num_panels + panel) * in_padded + i) * width;
        for (int64_t lane = 0; lane < width; ++lane) run[lane] = static_cast<float>(u[point][lane]);
      }
    }
    for (int64_t point = 0; point < 36; ++point) {  // the padding input channels' rows: zeros
      float* rows = out + ((point * num_panels + panel) * in_padded + plan.in_channels) * width;
      std::fill(rows, rows + (in_padded - plan.in_channels) * width, 0.0f);
    }
  }
}

void run_winograd(const WinogradPlan& plan, const float* src, const float* weights, const float* bias, float* dst,
                  float* scratch) {
  if (plan.block == 16) {
    run_winograd_avx512(plan, src, weights, bias, dst, scratch);
  } else {
    run_winograd_avx2(plan, src, weights, bias, dst, scratch);
  }
}

void run_winograd_step(const WinogradPlan& plan, const float* weights, const std::unordered_map<int, memory>& args,
                       float* scratch) {
  const auto bias = args.find(DNNL_ARG_BIAS);
  run_winograd(plan, static_cast<const float*>(args.at(DNNL_ARG_SRC).get_data_handle()), weights,
               bias == args.end() ? nullptr : static_cast<const float*>(bias->second.get_data_handle()),
               static_cast<float*>(args.at(DNNL_ARG_DST).get_data_handle()), first_aligned(scratch));
}

}  // namespace tessera::dnnl_backend
