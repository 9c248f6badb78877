// The integer GEMM compiled for AVX512 (flags from the file name; see CMakeLists.txt).
// Selected at run time from CPU features in quantization_matmul.cc.
#include "backends/native/kernels/quantization_internal.h"

namespace tessera::native {
namespace {

#include "backends/native/kernels/quantization_gemm_body.h"

}  // namespace

void integer_gemm_avx512(int64_t m, int64_t n, int64_t k, const int16_t* a, const int16_t* b, int32_t* c, int64_t ldc) {
  integer_gemm_body(m, n, k, a, b, c, ldc);
}

}  // namespace tessera::native
