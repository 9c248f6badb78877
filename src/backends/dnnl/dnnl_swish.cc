// SiLU / swish as Tessera's own loop inside oneDNN regions (contract in
// dnnl_internal.h, swish_plan).
//
// oneDNN 2.6's eltwise_swish, as a post-op or a step, costs about 0.6 ns an
// element on one Zen 4 core (0.24 ms of a 32 x 112 x 112 depthwise
// convolution's 0.40 ms); this loop runs the same 400 K elements in 0.12-0.13
// ms, at about memory speed. A step of its own runs it whenever its layouts
// allow, and a convolution's trailing swish becomes such a step where that
// was measured faster than the post-op (swish_pass_faster, dnnl_tuning.cc).
#include <cmath>

#include "backends/dnnl/dnnl_internal.h"
#include "backends/native/cpu_features.h"

namespace tessera::dnnl_backend {

void swish_span_portable(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float t = -x[i];
    y[i] = t >= 88.3762626647949f ? x[i] * 0.0f : x[i] / (1.0f + std::exp(t));
  }
}

SwishSpan swish_span() {
  static const SwishSpan span = native::cpu_features().avx512     ? swish_span_avx512
                                : native::cpu_features().avx2_fma ? swish_span_avx2
                                                                  : swish_span_portable;
  return span;
}

std::optional<int64_t> swish_plan(const Step& step, const std::vector<memory::desc>& roles) {
  if (step.kind != StepKind::kEltwise || step.algorithm != static_cast<int32_t>(dnnl::algorithm::eltwise_swish)) {
    return std::nullopt;
  }
  if (!step.post_ops.empty() || !step.output_scales.empty() || roles.size() != 2) return std::nullopt;
  // Swish's alpha (x * sigmoid(alpha x)) must be 1: SiLU.
  if (step.floats.empty() || step.floats[0] != 1.0f) return std::nullopt;
  const memory::desc& src = roles[0];
  if (src.data_type() != memory::data_type::f32 || src != roles[1] || src.data.format_kind != dnnl_blocked) {
    return std::nullopt;
  }
  // Every float of the buffer, padding included (swish(0) = 0 keeps a blocked layout's zero padding).
  return static_cast<int64_t>(src.get_size() / sizeof(float));
}

void run_swish(int64_t floats, const float* src, float* dst) {
  constexpr int64_t kChunk = 1 << 14;  // floats a task: 64 KiB
  const SwishSpan span = swish_span();
  const int64_t chunks = (floats + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kChunk, n = floats - begin < kChunk ? floats - begin : kChunk;
    span(src + begin, dst + begin, n);
  }
}

}  // namespace tessera::dnnl_backend
