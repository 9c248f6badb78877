// Measured placement (`tessera tune`): chooses which backend runs each part
// of a model by timing whole-model candidates on the real shapes.
//
// The search (tune_placement):
//  1. Candidates that each use one placement rule: the default priority
//     order, and each backend of the list alone (with native taking what it
//     refuses). Each is compiled and timed end to end (warm-up, then the
//     median of at least 5 runs and ~0.2 s), so the copies and layout changes
//     at region edges are in the times. The fastest is the starting point.
//     A candidate whose placement (node -> backend) was measured already
//     keeps that time and is listed as the same placement, not measured again.
//  2. Local search from the best placement so far, slowest first (by a
//     profiled run): each region's nodes, then each op type's nodes on one
//     backend (e.g. every Softmax on dnnl), are moved as one group to each
//     other backend of the list (a backend that refuses one of them makes the
//     candidate fail, recorded with the reason). A move is kept when the whole
//     model gets faster by more than 2% (the noise of a median here); the
//     moves are then made again from the new best (none is tried twice).
//  3. It stops when no move helps or the budget is spent (a candidate is only
//     started when the time the last one took still fits).
// Guarantee: the chosen placement is the fastest candidate measured, and the
// single-backend placements are always measured, so it is never slower than
// the best of them as measured in this run.
// Needs: a graph straight from a frontend; static input shapes once the
// options' input shapes are bound. Inputs are random (float uniform in
// [-1, 1), integers 0, bools false), so data-dependent control flow is timed
// on that data.
#pragma once
#include <functional>
#include <string>

#include "ir/graph.h"
#include "runtime/session.h"
#include "runtime/tuning_record.h"

namespace tessera {

struct TuneOptions {
  CompileOptions base;          // threads, backends, precision, input shapes, ...
  double budget_seconds = 60;   // for the whole search (the single-backend candidates always run)
  /// Called before each candidate: phase "measuring", candidates done, an estimate of the total.
  std::function<void(const std::string& phase, int64_t done, int64_t total)> progress;
};

TuningRecord tune_placement(const Graph& graph, const TuneOptions& options);

/// A table of the candidates measured and what was chosen, for people.
std::string tuning_summary(const TuningRecord& record);

}  // namespace tessera
