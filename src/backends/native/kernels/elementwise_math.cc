// Float32 exp/sigmoid/tanh/erf spans compiled with the baseline flags, and the
// run-time choice between them and the AVX2 and AVX-512 builds
// (elementwise_math_avx2.cc, elementwise_avx512.cc).
#define TESSERA_ELEMENTWISE_MATH_NAMESPACE baseline
#include "backends/native/cpu_features.h"
#include "backends/native/kernels/elementwise_math.h"

#include "backends/native/kernels/elementwise_internal.h"

namespace tessera::native::elementwise {

const Float32MathSpans& float32_math_baseline() {
  static const Float32MathSpans spans{baseline::exp_span, baseline::sigmoid_span, baseline::tanh_span,
                                      baseline::erf_span};
  return spans;
}

const Float32MathSpans& float32_math() {
  static const Float32MathSpans& best =
      cpu_features().avx512 ? float32_math_avx512() : (cpu_features().avx2_fma ? float32_math_avx2() : float32_math_baseline());
  return best;
}

}  // namespace tessera::native::elementwise
