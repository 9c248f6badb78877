// The geometry of one 2-D max pooling plane and the per-ISA kernels that pool
// it (nn_pool_rows.h, compiled once per ISA; chosen in nn_pool.cc).
#pragma once
#include <cstdint>

namespace tessera::native {

/// One (N, C) plane of a 2-D MaxPool: input H x W, output out_height x out_width.
struct MaxPoolPlane {
  int64_t height = 0, width = 0, out_height = 0, out_width = 0;
  int64_t kernel_h = 1, kernel_w = 1, stride_h = 1, stride_w = 1;
  int64_t pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1;
};

/// Pools `planes` consecutive planes of x into y (nn_pool_rows.h's max_pool_planes); `scratch` holds
/// 2 * width floats.
void max_pool_planes_avx512(const MaxPoolPlane& s, const float* x, float* y, int64_t planes, float* scratch);
void max_pool_planes_avx2(const MaxPoolPlane& s, const float* x, float* y, int64_t planes, float* scratch);

}  // namespace tessera::native
