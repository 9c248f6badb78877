// The native backend's declarations (see src/partition/declarations.h).
#pragma once
#include <utility>

#include "partition/declarations.h"

namespace tessera::native {

/// The composite a Conv followed by a Relu or Clip becomes.
inline constexpr const char* kConvActivation = "ConvActivation";
/// The decomposed LayerNorm (common_patterns.h) becomes one LayerNormalization.
inline constexpr const char* kLayerNorm = "LayerNorm";

const Declarations& native_declarations();

/// [low, high] of a Relu or a Clip whose bounds are constants (or absent),
/// as the Conv epilogue applies it.
std::pair<float, float> clamp_of_activation(const Graph& graph, const Node& activation);

}  // namespace tessera::native
