#include "backends/native/kernel.h"

namespace tessera::native {

void register_recurrent_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace tessera::native
