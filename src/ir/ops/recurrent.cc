#include "ir/op_schema.h"

namespace tessera {

void register_recurrent_ops(OpRegistry& registry) { (void)registry; }

}  // namespace tessera
