// Max pooling on channel-blocked layouts as a direct loop (contract in
// dnnl_internal.h, max_pool_plan).
//
// oneDNN 2.6's jit:avx2 max pooling took 0.51 ms for a 3x3, stride-1 pool of
// a 192-channel 28x28 map in nChw8c (GoogLeNet's branch pools; about 2.4 GB/s
// and 20x the work's cost). In a layout whose channels are the innermost
// block, each window element is `block` contiguous floats, so a max over
// window elements is a few vector maxima per element: this loop does it at
// memory speed. The max propagates NaN (a window holding NaN gives NaN), as
// numpy, PyTorch and the native kernel do.
#include <immintrin.h>
#include <omp.h>

#include <limits>

#include "backends/dnnl/dnnl_internal.h"

namespace tessera::dnnl_backend {
namespace {

/// One output row of one channel block. SSE (every x86-64 CPU has it) keeps
/// the window's maxima in registers: kBlock / 4 vectors, plus as many masks
/// of the lanes that met a NaN (maxps alone would drop a NaN already held).
template <int kBlock>
void pool_row(const MaxPoolPlan& p, const float* image, float* row, int64_t oh) {
  constexpr int kVectors = kBlock / 4;
  const int64_t h0 = oh * p.stride[0] - p.pad[0];
  for (int64_t ow = 0; ow < p.out[1]; ++ow) {
    __m128 acc[kVectors], nan[kVectors];
    for (int v = 0; v < kVectors; ++v) {
      acc[v] = _mm_set1_ps(-std::numeric_limits<float>::infinity());
      nan[v] = _mm_setzero_ps();
    }
    const int64_t w0 = ow * p.stride[1] - p.pad[1];
    for (int64_t kh = 0; kh < p.kernel[0]; ++kh) {
      const int64_t h = h0 + kh * p.dilation[0];
      if (h < 0 || h >= p.in[0]) continue;
      const float* line = image + h * p.src_strides[2];
      for (int64_t kw = 0; kw < p.kernel[1]; ++kw) {
        const int64_t w = w0 + kw * p.dilation[1];
        if (w < 0 || w >= p.in[1]) continue;
        const float* x = line + w * kBlock;
        for (int v = 0; v < kVectors; ++v) {
          const __m128 value = _mm_loadu_ps(x + 4 * v);
          acc[v] = _mm_max_ps(acc[v], value);
          nan[v] = _mm_or_ps(nan[v], _mm_cmpunord_ps(value, value));
        }
      }
    }
    float* out = row + ow * kBlock;
    for (int v = 0; v < kVectors; ++v) _mm_storeu_ps(out + 4 * v, _mm_or_ps(acc[v], nan[v]));  // all-ones bits: a NaN
  }
}

}  // namespace

std::optional<MaxPoolPlan> max_pool_plan(const Step& step, const std::vector<memory::desc>& roles) {
  if (step.kind != StepKind::kPooling || step.algorithm != static_cast<int32_t>(dnnl::algorithm::pooling_max)) {
    return std::nullopt;
  }
  if (roles.size() != 2 || step.ints.size() != 10 || !step.post_ops.empty()) return std::nullopt;
  MaxPoolPlan p;
  int64_t out_block = 0;
  if (!channel_blocked(roles[0], p.block, p.src_strides) || !channel_blocked(roles[1], out_block, p.dst_strides) ||
      out_block != p.block) {
    return std::nullopt;
  }
  const dnnl_memory_desc_t& in = roles[0].data;
  const dnnl_memory_desc_t& out = roles[1].data;
  if (in.dims[0] != out.dims[0] || in.padded_dims[1] != out.padded_dims[1]) return std::nullopt;
  p.batch = in.dims[0];
  p.channel_blocks = in.padded_dims[1] / p.block;
  p.in[0] = in.dims[2];
  p.in[1] = in.dims[3];
  p.out[0] = out.dims[2];
  p.out[1] = out.dims[3];
  // ints: strides, kernel, dilations (from 0), begin paddings, end paddings (lower_pooling).
  for (int d = 0; d < 2; ++d) {
    p.stride[d] = step.ints[static_cast<size_t>(d)];
    p.kernel[d] = step.ints[static_cast<size_t>(2 + d)];
    p.dilation[d] = step.ints[static_cast<size_t>(4 + d)] + 1;
    p.pad[d] = step.ints[static_cast<size_t>(6 + d)];
    const int64_t pad_end = step.ints[static_cast<size_t>(8 + d)];
    // Bounds first (a payload is untrusted): the window must fit the padded map, and the output
    // must have exactly the windows oneDNN's own formula gives.
    constexpr int64_t kLimit = int64_t{1} << 30;
    for (int64_t v : {p.stride[d], p.kernel[d], p.dilation[d], p.pad[d], pad_end, p.in[d], p.out[d]}) {
      if (v < 0 || v > kLimit) return std::nullopt;
    }
    if (p.stride[d] < 1 || p.kernel[d] < 1 || p.dilation[d] < 1 || p.in[d] < 1 || p.out[d] < 1) return std::nullopt;
    const int64_t span = p.dilation[d] * (p.kernel[d] - 1) + 1;
    const int64_t padded = p.in[d] + p.pad[d] + pad_end;
    if (span > padded || p.out[d] != (padded - span) / p.stride[d] + 1) return std::nullopt;
    // Every window starts inside the map or its begin padding and holds an element of the map.
    if ((p.out[d] - 1) * p.stride[d] - p.pad[d] >= p.in[d] || p.pad[d] >= p.kernel[d]) return std::nullopt;
  }
  return p;
}

void run_max_pool(const MaxPoolPlan& plan, const float* src, float* dst) {
  const int64_t rows = plan.batch * plan.channel_blocks * plan.out[0];
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t oh = r % plan.out[0];
    const int64_t cb = (r / plan.out[0]) % plan.channel_blocks;
    const int64_t n = r / (plan.out[0] * plan.channel_blocks);
    const float* image = src + n * plan.src_strides[0] + cb * plan.src_strides[1];
    float* row = dst + n * plan.dst_strides[0] + cb * plan.dst_strides[1] + oh * plan.dst_strides[2];
    if (plan.block == 8) {
      pool_row<8>(plan, image, row, oh);
    } else {
      pool_row<16>(plan, image, row, oh);
    }
  }
}

}  // namespace tessera::dnnl_backend
