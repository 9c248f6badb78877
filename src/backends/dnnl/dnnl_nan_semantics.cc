// Which oneDNN 2.6 computations keep numpy's and PyTorch's NaN and ±Inf
// semantics: the one table of them (finite_only_reason). The declarations
// claim these ops; a region whose program holds one of these steps says it
// is exact only for finite inputs, and the runtime runs it on native when an
// input holds NaN or ±Inf (ExecutableRegion::exact_only_for_finite_inputs).
//
// Measured on oneDNN's JIT kernels (tests/unit/dnnl_nan_test.cc feeds NaN and
// ±Inf to every op family claimed, against a scalar reference). The limit
// that remains: a NaN or Inf made inside a region from finite inputs (an
// overflow to Inf, then Inf - Inf) can still be dropped by one of these steps
// further on; the guard sees only what enters the region.
#include "backends/dnnl/dnnl_internal.h"

namespace tessera::dnnl_backend {
namespace {

using dnnl::algorithm;

/// Element-wise algorithms (steps and post-ops) that drop or invent NaN/Inf.
std::optional<std::string> eltwise_reason(int32_t alg, float alpha) {
  switch (static_cast<algorithm>(alg)) {
    case algorithm::eltwise_relu:
      // With alpha != 0 it is a compare and blend (NaN * alpha stays NaN).
      if (alpha == 0.0f) return "relu is max(x, 0), which gives 0 for NaN";
      return std::nullopt;
    case algorithm::eltwise_clip:
    case algorithm::eltwise_clip_v2:
      return "clip is max(x, lower) then min(., upper), which gives the lower bound for NaN";
    case algorithm::eltwise_exp:
      return "exp clamps its input with a max, which gives +Inf for NaN";
    default:
      return std::nullopt;
  }
}

std::optional<std::string> binary_reason(int32_t alg) {
  if (alg == static_cast<int32_t>(algorithm::binary_max) || alg == static_cast<int32_t>(algorithm::binary_min)) {
    return "binary max/min return the second operand where the first is NaN";
  }
  return std::nullopt;
}

std::optional<std::string> step_reason(const Step& step) {
  switch (step.kind) {
    case StepKind::kConvolution:
      if (step.algorithm == static_cast<int32_t>(algorithm::convolution_winograd)) {
        return "Winograd convolution mixes neighbouring pixels in its transforms (an Inf becomes NaN beyond its window)";
      }
      return std::nullopt;
    case StepKind::kEltwise:
      return eltwise_reason(step.algorithm, step.floats.empty() ? 0.0f : step.floats[0]);
    case StepKind::kBinary:
      return binary_reason(step.algorithm);
    case StepKind::kPooling:
      if (step.algorithm == static_cast<int32_t>(algorithm::pooling_max)) {
        return "max pooling drops NaN and gives -FLT_MAX for a window of -Inf";
      }
      return std::nullopt;
    case StepKind::kSoftmax:
    case StepKind::kLogSoftmax:
      return "softmax drops NaN from its row maximum (the row is not all NaN as in numpy and PyTorch)";
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<std::string> finite_only_reason(const Step& step) {
  if (std::optional<std::string> why = step_reason(step)) return why;
  for (const PostOp& p : step.post_ops) {
    std::optional<std::string> why;
    if (p.kind == PostOpKind::kEltwise) why = eltwise_reason(p.algorithm, p.alpha);
    if (p.kind == PostOpKind::kBinary) why = binary_reason(p.algorithm);
    if (why) return "a fused " + *why;
  }
  return std::nullopt;
}

}  // namespace tessera::dnnl_backend
