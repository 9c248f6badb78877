#include "backends/native/kernel.h"

namespace tessera::native {

void register_quantization_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace tessera::native
