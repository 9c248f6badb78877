// The scan behind the runtime's non-finite guard (see
// ExecutableRegion::exact_only_for_finite_inputs in backends/backend.h).
#pragma once
#include "ir/tensor.h"

namespace tessera {

/// False when a floating-point tensor (float32, float64, float16, bfloat16)
/// holds a NaN or ±Inf; true otherwise, and for every other dtype. Reads the
/// exponent bits with a branch-free, vectorisable loop, stopping at the first
/// block that holds one.
bool all_finite(const TensorView& view);

}  // namespace tessera
