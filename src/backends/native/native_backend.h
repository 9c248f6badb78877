// Tessera's own CPU backend: supports every op that has a schema and a kernel.
#pragma once
#include <memory>
#include <vector>

#include "backends/backend.h"

namespace tessera {

std::unique_ptr<Backend> make_native_backend();

/// Runs one node on constant inputs with the native kernels (used by constant
/// folding and by tests as the reference evaluator).
std::vector<Tensor> evaluate_node_natively(const Node& node, const std::vector<const Tensor*>& inputs);

}  // namespace tessera
