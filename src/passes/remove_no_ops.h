// Nodes that compute nothing, removed before partitioning: Identity,
// Dropout whose mask no node reads and that is in inference (training_mode
// absent or a constant false) or has a constant ratio of 0, and Cast to the
// type its input already has. Each costs a copy where it runs, and on a
// backend other than its neighbours' it splits
// their region in two (a ratio-0 Dropout between two oneDNN matmuls made
// two regions and a copy each way).
//
// A removed node's readers read its input instead; where its output is a
// graph output, the node that makes its input writes that output directly
// (when the input is no graph input, constant or other output; otherwise the
// node stays). Bodies of If/Loop/Scan read outer values as node inputs, so
// they follow the same renaming.
//
// Needs: types inferred (infer_and_fold), for Cast. Keeps: graph inputs and
// outputs, every other node.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

struct RemovedNode {
  std::string node, op_type;
  std::string why;  // "a no-op (Dropout in inference)", ...
};

/// Returns the nodes removed.
std::vector<RemovedNode> remove_no_ops(Graph& graph);

}  // namespace tessera
