// The oneDNN backend: Conv, MatMul/Gemm, pooling, normalisation, softmax,
// element-wise and layout ops through oneDNN 2.6 primitives, with fused
// post-ops and blocked layouts kept inside each region.
#pragma once
#include <memory>

#include "backends/backend.h"

namespace tessera {

std::unique_ptr<Backend> make_dnnl_backend();

}  // namespace tessera
