// The float32 Softmax / LogSoftmax microkernels compiled with AVX512 flags
// (see reduction_softmax_rows.h); chosen at run time in reduction_softmax.cc
// when the CPU supports AVX-512F.
#define TESSERA_SOFTMAX_ROWS_NAMESPACE avx512
#include "backends/native/kernels/reduction_softmax_rows.h"

namespace tessera::native {

void softmax_rows_avx512(const float* x, float* y, int64_t rows, int64_t n) { avx512::softmax_rows(x, y, rows, n); }
void log_softmax_rows_avx512(const float* x, float* y, int64_t rows, int64_t n) {
  avx512::log_softmax_rows(x, y, rows, n);
}
void normalize_column_block_avx512(const float* in, float* out, int64_t extent, int64_t inner, int64_t width,
                                  bool log) {
  avx512::normalize_column_block(in, out, extent, inner, width, log);
}

}  // namespace tessera::native
