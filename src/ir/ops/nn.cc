#include "ir/op_schema.h"
#include "ir/shape_util.h"

namespace tessera {

void register_nn_ops(OpRegistry& registry) { (void)registry; }

}  // namespace tessera
