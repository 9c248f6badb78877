#include "backends/native/dispatch.h"
#include "backends/native/kernel.h"

namespace tessera::native {

void register_tensor_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace tessera::native
