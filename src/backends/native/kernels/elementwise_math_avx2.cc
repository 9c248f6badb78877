// Float32 exp/sigmoid/tanh/erf spans (elementwise_math.h) compiled with AVX2
// and FMA flags; elementwise_math.cc uses them on CPUs with AVX2 but not
// AVX-512 (the baseline build is 4-wide SSE2 without FMA).
#define TESSERA_ELEMENTWISE_MATH_NAMESPACE avx2
#include "backends/native/kernels/elementwise_math.h"

#include "backends/native/kernels/elementwise_internal.h"

namespace tessera::native::elementwise {

const Float32MathSpans& float32_math_avx2() {
  static const Float32MathSpans spans{avx2::exp_span, avx2::sigmoid_span, avx2::tanh_span, avx2::erf_span};
  return spans;
}

}  // namespace tessera::native::elementwise
