// A zero Pad in front of convolutions and average pools becomes their own
// padding. torchvision's Inception-v3 exports avg_pool2d(3, stride 1,
// padding 1) as Pad -> AveragePool (9 of them): the Pad ran on native, split
// the oneDNN region around it, and left the pool a plain-layout input that
// oneDNN 2.6 averages on its slow `simple_nchw` kernel (8 ms for 288x35x35,
// a quarter of the model's time).
//
// Folded: Pad with mode "constant" and a constant value of 0 (or none),
// constant non-negative pads on the spatial dims only (N and C unpadded),
// no `axes` input, whose every reader is either
//   - a Conv with explicit (or no) pads: the Pad's zeros are added to them;
//   - an AveragePool with no padding of its own (pads 0, auto_pad NOTSET or
//     VALID) and ceil_mode 0: it pools the padded tensor and divides by the
//     kernel size everywhere, which is that pool with the Pad's pads and
//     count_include_pad=1.
// The readers then read the Pad's input and the Pad is left unread (dead
// node elimination drops it). A Pad that is a graph output, or has any
// other reader, stays.
//
// Needs: types inferred (the Pad input's rank), constants folded. Keeps:
// graph inputs and outputs; every value's type.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

/// Returns the names of the Pad nodes folded away.
std::vector<std::string> fold_pad(Graph& graph);

}  // namespace tessera
