// Native kernels of the tensor op family. The kernels live in tensor_shape.cc,
// tensor_layout.cc and tensor_index.cc; the copy engine in tensor_copy.cc.
#include "backends/native/kernels/tensor_internal.h"

namespace tessera::native {

void register_tensor_kernels(KernelRegistry& registry) {
  register_tensor_shape_kernels(registry);
  register_tensor_layout_kernels(registry);
  register_tensor_index_kernels(registry);
}

}  // namespace tessera::native
