// The oneDNN backend's declarations (see src/partition/declarations.h).
#pragma once
#include <cstdint>

#include <optional>

#include "ir/ops/tensor_internal.h"
#include "partition/declarations.h"

namespace tessera::dnnl_backend {

const Declarations& dnnl_declarations();

/// The data inputs (the first `data_inputs`, or all) and every present
/// output are float32 with a static, non-empty shape of rank at most 6; the
/// reason names the first that is not.
SupportDecision float32_static(const Graph& graph, const Node& node, size_t data_inputs = SIZE_MAX);

/// A Slice of `graph` whose starts, ends, axes and steps are constants with
/// every step 1, resolved (starts are the offsets per axis), or nullopt.
std::optional<SliceSpec> constant_slice(const Graph& graph, const Node& node);

/// Pooling, normalisation, softmax and layout ops (dnnl_declarations_more.cc).
void register_more_declarations(Declarations& declarations);

}  // namespace tessera::dnnl_backend
