// A Transpose that moves only dims of size 1, rewritten as a Reshape: its
// output has its input's elements in the same order (a view), so on native
// it aliases its input instead of copying it, and a oneDNN region takes it
// as a reshape. PyTorch writes one on each side of a batch-first
// transformer layer (x.transpose(0, 1) of [1, seq, d] is [seq, 1, d]): a
// BERT-shaped encoder at sequence 256 copied 128 KB twice a layer.
//
// The condition holds at every shape the model's dims allow: the dims that
// are not statically 1 (open ones included, which may be 1 or not at run
// time) keep their order. The new shape is a constant: each static dim by
// its size, an open dim that stays in place as 0 (Reshape copies the input's
// dim there), and at most one open dim that moves as -1; a Transpose that
// would need two is left as it is.
//
// Needs: types inferred (infer_and_fold). Keeps: every node's name, output
// and readers; the node's op becomes Reshape (its perm attribute dropped),
// with a new constant shape input.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

/// Returns the names of the Transpose nodes rewritten.
std::vector<std::string> transpose_as_reshape(Graph& graph);

}  // namespace tessera
