// Registration of the native nn kernels. The kernels live in nn_matmul.cc
// (Gemm, MatMul), nn_conv.cc (Conv, ConvTranspose), nn_pool.cc and
// nn_norm.cc; the GEMM they share in nn_gemm*.cc.
#include "backends/native/kernels/nn_internal.h"

namespace tessera::native {

void register_nn_kernels(KernelRegistry& registry) {
  register_nn_matmul_kernels(registry);
  register_nn_conv_kernels(registry);
  register_nn_pool_kernels(registry);
  register_nn_norm_kernels(registry);
}

}  // namespace tessera::native
