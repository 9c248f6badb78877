// Which oneDNN 2.6 computations keep numpy's and PyTorch's NaN and ±Inf
// semantics (finite_only_reason), read from the op tables' finite_only
// column (dnnl_op_tables.cc), where each fact is written once. The declarations
// claim these ops; a region whose program holds one of these steps says it
// is exact only for finite inputs, and the runtime runs it on native when an
// input holds NaN or ±Inf (ExecutableRegion::exact_only_for_finite_inputs).
//
// Measured on oneDNN's JIT kernels (tests/unit/dnnl_nan_test.cc feeds NaN and
// ±Inf to every op family claimed, against a scalar reference). A NaN or Inf
// made inside a region from finite inputs (an overflow to Inf, then Inf - Inf)
// raises the CPU's overflow or invalid-operation flag on the thread that made
// it: such a region clears the flags of its threads before it runs and reads
// them after (clear_fp_flags, fp_flags_raised), and when one is raised the
// runtime runs it again on native (ValueStore::made_non_finite). A raised flag
// whose NaN did not survive costs a native run, never a wrong answer.
#include <cfenv>

#include "backends/dnnl/dnnl_internal.h"
#include "backends/dnnl/dnnl_op_tables.h"

namespace tessera::dnnl_backend {
namespace {

std::optional<std::string> reason(const char* text) {
  if (!text) return std::nullopt;
  return std::string(text);
}

/// Element-wise algorithms (steps and post-ops) that drop or invent NaN/Inf.
std::optional<std::string> eltwise_reason(int32_t alg, float alpha) {
  const EltwiseOp* row = find_eltwise_algorithm(alg);
  if (!row || (row->finite_only_when_alpha_zero && alpha != 0.0f)) return std::nullopt;
  return reason(row->finite_only);
}

std::optional<std::string> binary_reason(int32_t alg) {
  const BinaryOp* row = find_binary_algorithm(alg);
  return row ? reason(row->finite_only) : std::nullopt;
}

std::optional<std::string> step_reason(const Step& step) {
  switch (step.kind) {
    case StepKind::kConvolution: {
      const ConvolutionAlgorithm* row = find_convolution_algorithm(step.algorithm);
      return row ? reason(row->finite_only) : std::nullopt;
    }
    case StepKind::kEltwise:
      return eltwise_reason(step.algorithm, step.floats.empty() ? 0.0f : step.floats[0]);
    case StepKind::kBinary:
      return binary_reason(step.algorithm);
    case StepKind::kPooling: {
      const PoolingOp* row = find_pooling_algorithm(step.algorithm);
      return row ? reason(row->finite_only) : std::nullopt;
    }
    default: {
      const StructuredOp* row = find_structured_step(step.kind);
      return row ? reason(row->finite_only) : std::nullopt;
    }
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

void clear_fp_flags(int threads) {
  std::feclearexcept(FE_INVALID | FE_OVERFLOW);
  if (threads <= 1) return;
#pragma omp parallel num_threads(threads)
  std::feclearexcept(FE_INVALID | FE_OVERFLOW);
}

bool fp_flags_raised(int threads) {
  int raised = std::fetestexcept(FE_INVALID | FE_OVERFLOW);
  if (threads > 1) {
#pragma omp parallel num_threads(threads) reduction(| : raised)
    raised |= std::fetestexcept(FE_INVALID | FE_OVERFLOW);
  }
  return raised != 0;
}

}  // namespace tessera::dnnl_backend
