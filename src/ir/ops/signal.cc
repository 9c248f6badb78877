#include "ir/op_schema.h"

namespace tessera {

void register_signal_ops(OpRegistry& registry) { (void)registry; }

}  // namespace tessera
