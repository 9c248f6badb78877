// Winograd F(4x4, 3x3) for float32 3x3 stride-1 convolutions on nChw8c: the
// plan (which steps it takes, checked like any payload) and the weight
// transform. Contract in dnnl_internal.h; the AVX2 kernels are in
// dnnl_winograd_avx2.cc.
//
// oneDNN 2.6 has Winograd only with AVX-512; below it a 3x3 convolution runs
// directly, 9 multiply-adds per input channel and output. F(4x4, 3x3) makes a
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
/// from 79 to 75 (64 MiB: no better).
constexpr int64_t kChunkBytes = int64_t{16} << 20;
/// The weights' transform is 4x the weights; beyond this many floats the step runs directly.
constexpr int64_t kMaxWeightFloats = int64_t{1} << 31;
int64_t panels(int64_t out_blocks) { return (out_blocks + 1) / 2; }  // 16 output channels each

}  // namespace

bool winograd_available() { return native::cpu_features().avx2_fma; }

int64_t WinogradPlan::weight_floats() const { return 36 * in_blocks * 8 * panels(out_blocks) * 16; }

int64_t WinogradPlan::scratch_bytes() const {
  return 36 * chunk * 8 * (in_blocks + out_blocks) * static_cast<int64_t>(sizeof(float));
}

std::optional<WinogradPlan> winograd_plan(const Step& step, const std::vector<memory::desc>& roles) {
  if (step.kind != StepKind::kConvolution || step.algorithm != kTesseraWinograd || !winograd_available()) {
    return std::nullopt;
  }
  if (roles.size() != 3 && roles.size() != 4) return std::nullopt;
  if (step.ints.size() != 8) return std::nullopt;  // strides, dilations (from 0), begin pads, end pads
  WinogradPlan p;
  int64_t in_block = 0, out_block = 0;
  if (!channel_blocked(roles[0], in_block, p.src_strides) || !channel_blocked(roles.back(), out_block, p.dst_strides) ||
      in_block != 8 || out_block != 8) {
    return std::nullopt;
  }
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
  p.in_blocks = src.padded_dims[1] / 8;
  p.out_blocks = dst.padded_dims[1] / 8;
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
  const int64_t tile_bytes = 36 * 8 * (p.in_blocks + p.out_blocks) * static_cast<int64_t>(sizeof(float));
  p.chunk = std::clamp<int64_t>(kChunkBytes / tile_bytes / 6 * 6, 12, (tiles + 5) / 6 * 6);
  if (p.weight_floats() > kMaxWeightFloats) return std::nullopt;
  return p;
}

void write_winograd_weights(const WinogradPlan& plan, const float* plain, float* out) {
  // Layout: [36 points][panel of 16 output channels][input channel, padded to blocks][16]. The 16
  // output channels of a panel are transformed together, so each point's writes are one run of 16.
  const int64_t in_padded = plan.in_blocks * 8;
  const int64_t num_panels = panels(plan.out_blocks);
  for (int64_t panel = 0; panel < num_panels; ++panel) {
    const int64_t first = panel * 16, count = std::min<int64_t>(16, plan.out_channels - first);
    for (int64_t i = 0; i < plan.in_channels; ++i) {
      double u[36][16] = {};
      for (int64_t lane = 0; lane < count; ++lane) {
        double point[36];  // U = G g G^T
        native::winograd_f4x3_weights(plain + ((first + lane) * plan.in_channels + i) * 9, point);
        for (int p = 0; p < 36; ++p) u[p][lane] = point[p];
      }
      for (int64_t point = 0; point < 36; ++point) {
        float* run = out + ((point * num_panels + panel) * in_padded + i) * 16;
        for (int64_t lane = 0; lane < 16; ++lane) run[lane] = static_cast<float>(u[point][lane]);
      }
    }
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
