// Internal to the signal op family's schemas (src/ir/ops/signal*.cc).
#pragma once
#include "ir/op_schema.h"

namespace tessera {

/// MaxUnpool's output shape without an output_shape input:
/// (in - 1) * stride - pad_begin - pad_end + kernel per spatial dim.
Shape max_unpool_default_shape(const Node& node, const Shape& input);

/// Window functions, DFT, STFT, MelWeightMatrix (signal_spectral.cc).
void register_signal_spectral_ops(OpRegistry& registry);
/// RandomUniform/Normal(+Like), Bernoulli (signal_spectral.cc).
void register_signal_random_ops(OpRegistry& registry);

}  // namespace tessera
