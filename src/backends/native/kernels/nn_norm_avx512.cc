// LayerNormalization's float32 row kernel compiled with AVX512 flags (see
// nn_norm_rows.h); chosen at run time in nn_norm.cc.
#define TESSERA_NORM_ROWS_NAMESPACE avx512
#include "backends/native/kernels/nn_norm_rows.h"

namespace tessera::native {

void layer_norm_row_avx512(const float* p, float* q, int64_t n, double epsilon, const float* gamma, const float* beta,
                         float* mean, float* inv_std) {
  avx512::layer_norm_row(p, q, n, epsilon, gamma, beta, mean, inv_std);
}

}  // namespace tessera::native
