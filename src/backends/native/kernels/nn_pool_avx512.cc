// The float32 2-D max pooling compiled with AVX512 flags (see nn_pool_rows.h);
// chosen at run time in nn_pool.cc.
#define TESSERA_POOL_ROWS_NAMESPACE avx512
#include "backends/native/kernels/nn_pool_rows.h"

namespace tessera::native {

void max_pool_planes_avx512(const MaxPoolPlane& s, const float* x, float* y, int64_t planes, float* row_scratch) {
  for (int64_t p = 0; p < planes; ++p) {
    avx512::max_pool_plane(s, x + p * s.height * s.width, y + p * s.out_height * s.out_width, row_scratch);
  }
}

}  // namespace tessera::native
