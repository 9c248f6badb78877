// A Loop whose trip count is known at compile time and whose body cannot end
// it early becomes its body's nodes, once per trip, in the main graph: they
// are partitioned, fused and planned like any other node instead of run
// trip by trip by the native subgraph interpreter. The trip count is known
// when M is a constant after folding (a torch-scripted `for i in
// range(x.size(0))` compiled with its shapes fixed, a count the exporter left
// as an initializer); the body cannot end the loop when the Loop's cond is
// absent or a constant true and the body's cond output is its cond input
// (through Identities) or a constant true.
//
// Trip t's nodes are named "<loop>/<t>/<node>" (values likewise, where the
// name is taken); its iteration number is a constant t, its cond a constant
// true, its carried values the previous trip's body outputs (the Loop's
// initial values for trip 0), its captures the Loop's inputs after the
// formal ones; constants are shared, not copied. Each carried output becomes
// an Identity of the last trip's value (remove_no_ops drops them); each scan
// output a Concat on a new axis 0 of every trip's value, each Unsqueezed.
// A Loop that carries a sequence (a list built trip by trip) stays a Loop:
// the interpreter appends to it in place, where unrolled SequenceInserts copy
// the list so far. Loops of no trips, of more than kMaxUnrolledTrips trips or
// kMaxUnrolledNodes copied nodes, or that would take the graph past four
// times that (nested loops multiply), stay Loops.
//
// Needs: constants folded (infer_and_fold). Keeps: graph inputs and outputs
// and their types. The copies' types come from the body as imported; run
// infer_and_fold after it (a body may hold an If it decides, or another Loop).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

inline constexpr int64_t kMaxUnrolledTrips = 1024;
inline constexpr int64_t kMaxUnrolledNodes = 4096;

struct UnrolledLoop {
  std::string node;   // the Loop's name
  int64_t trips = 0;  // its trip count
  size_t nodes = 0;   // nodes the trips added
};

/// Returns the Loops unrolled, in the order they were.
std::vector<UnrolledLoop> unroll_constant_loops(Graph& graph);

}  // namespace tessera
