// The float32 2-D max pooling compiled with AVX512 flags (see nn_pool_rows.h);
// chosen at run time in nn_pool.cc.
#define TESSERA_POOL_ROWS_NAMESPACE avx512
#include "backends/native/kernels/nn_pool_rows.h"

namespace tessera::native {

void max_pool_planes_avx512(const MaxPoolPlane& s, const float* x, float* y, int64_t planes, float* scratch) {
  avx512::max_pool_planes(s, x, y, planes, scratch);
}

}  // namespace tessera::native
