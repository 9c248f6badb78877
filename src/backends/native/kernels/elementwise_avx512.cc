// Float32 exp/sigmoid/tanh/erf spans (elementwise_math.h) compiled with
// AVX-512 flags; elementwise_math.cc uses them when the CPU has AVX-512F.
#define TESSERA_ELEMENTWISE_MATH_NAMESPACE avx512
#include "backends/native/kernels/elementwise_math.h"

#include "backends/native/kernels/elementwise_internal.h"

namespace tessera::native::elementwise {

const Float32MathSpans& float32_math_avx512() {
  static const Float32MathSpans spans{avx512::exp_span, avx512::sigmoid_span, avx512::tanh_span, avx512::erf_span};
  return spans;
}

}  // namespace tessera::native::elementwise
