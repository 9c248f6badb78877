// LayerNormalization's float32 row kernel compiled with AVX2 flags (see
// nn_norm_rows.h); chosen at run time in nn_norm.cc.
#define TESSERA_NORM_ROWS_NAMESPACE avx2
#include "backends/native/kernels/nn_norm_rows.h"

namespace tessera::native {

void layer_norm_row_avx2(const float* p, float* q, int64_t n, double epsilon, const float* gamma, const float* beta,
                         float* mean, float* inv_std) {
  avx2::layer_norm_row(p, q, n, epsilon, gamma, beta, mean, inv_std);
}

}  // namespace tessera::native
