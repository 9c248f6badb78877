#include "backends/native/kernel.h"

namespace tessera::native {

void register_signal_kernels(KernelRegistry& registry) { (void)registry; }

}  // namespace tessera::native
