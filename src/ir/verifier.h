// The IR's invariants, checked in one place. Runs between passes in debug
// builds and tests (TESSERA_VERIFY=1 forces it in release builds).
#pragma once
#include "ir/graph.h"

namespace tessera {

/// Throws an internal error naming the first broken invariant:
/// single definition per value, topological node order, defined outputs,
/// unique value and node names, known op schemas with valid arity.
void verify_graph(const Graph& graph);

}  // namespace tessera
