// The integer GEMM's microkernel compiled for AVX-512 (F, BW, DQ, VL) (flags
// from the file name; see CMakeLists.txt). Chosen at run time from CPU features
// in quantization_matmul.cc.
#include <immintrin.h>

#include <cstring>

#include "backends/native/kernels/quantization_internal.h"

namespace tessera::native {
namespace {

#include "backends/native/kernels/quantization_gemm_body.h"

}  // namespace

void integer_gemm_tiles_avx512(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda, const int16_t* packed_b,
                               int32_t* c, int64_t ldc) {
  integer_gemm_tiles(m, n, k, a, lda, packed_b, c, ldc);
}

}  // namespace tessera::native
