// The oneDNN backend's declarations (see src/partition/declarations.h).
#pragma once
#include "partition/declarations.h"

namespace tessera::dnnl_backend {

const Declarations& dnnl_declarations();

/// Pooling, normalisation, softmax and layout ops (dnnl_declarations_more.cc).
void register_more_declarations(Declarations& declarations);

}  // namespace tessera::dnnl_backend
