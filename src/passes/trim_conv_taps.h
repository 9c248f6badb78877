// Convolution kernel taps that only ever read padding, dropped. A dilated
// convolution on a small map (DeepLabV3's ASPP: 3x3 with dilation 12, 24 and
// 36 and as much padding, on an 8x8 map at 128x128 input) reaches past the
// input with every tap but the centre for every output position: those taps
// multiply zeros. Their weights are cut out and the padding shrinks by as
// much, so the convolution becomes a smaller one (there, 1x1) with the same
// output shape and the same values (the dropped products were exact zeros:
// only a NaN or Inf weight would have made them otherwise, and such a weight
// keeps its tap).
//
// Needs: types inferred (the input's spatial dims must be static), weights
// constant. Keeps: every node, graph inputs and outputs; a trimmed weight is
// a new constant (the old one may have other readers). An axis is left as it
// is where trimming would need negative padding.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

/// Returns the names of the Conv nodes whose kernels were trimmed.
std::vector<std::string> trim_conv_taps(Graph& graph);

}  // namespace tessera
