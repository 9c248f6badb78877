// An If whose condition is known at compile time becomes the nodes of the
// branch it takes, in the main graph, so that they are partitioned, fused and
// planned like any other node instead of run by the native subgraph
// interpreter. A condition is known when it is a constant after folding: a
// model scripted by torch that tests a size (`if x.size(0) > 1`) compiled with
// its shapes fixed, or a flag the exporter left as an initializer.
//
// The branch's nodes are copied in place of the If, named "<if>/<node>", its
// values renamed "<if>/<value>" where the name is taken; the outer values the
// branch captures are the If's inputs after its formal one; its constants are
// shared, not copied. Each If output becomes an Identity of the branch's
// output (remove_no_ops drops them). Subgraphs inside the branch are kept as
// they are (their captures are the copied nodes' inputs). Runs until no If
// with a constant condition is left (a branch may hold another).
//
// Needs: constants folded (infer_and_fold), so that a computed condition is a
// constant. Keeps: graph inputs and outputs and their types. The inlined nodes'
// types come from the branch as imported; run infer_and_fold after it.
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

struct InlinedIf {
  std::string node;    // the If's name
  bool branch = true;  // then (true) or else (false)
  size_t nodes = 0;    // nodes the branch added
};

/// Returns the Ifs inlined, in the order they were.
std::vector<InlinedIf> inline_constant_if(Graph& graph);

}  // namespace tessera
