// Per-step thread counts of a oneDNN region, chosen by measurement.
//
// Contract: after a region's primitives exist, each step marked single_candidate
// (modest work, running on the session's N > 1 threads, with a one-thread
// primitive that keeps every layout, or a Tessera loop) is timed on one thread
// and on N, inside runs of the whole region in its own order on zero-filled
// inputs, alternating the two configurations; a step gets one thread where
// its median there is no slower, and then whole runs of that mix are timed
// against runs with every step on N threads: the mix is kept only where it is
// at least 5% faster. In a small region every step is a candidate, and runs
// with all of them on one thread are timed too: the fastest of the three
// configurations is kept, where it beats the team by that margin
// (pick_step_threads_config). The data the runs compute is never read.
//
// Why: a parallel step pays a fork-join (about 3 µs here) and, on reorders and
// concats, the second core's reads of data the first one wrote. On the Zen 5
// VM ShuffleNetV2 ran 3.3 ms on two threads and 2.5 on one: its 184 steps' channel
// shuffles (reorders of 90K floats) took 15 µs each on two threads against 3.6
// on one. Where a step's time sits on either side depends on the CPU, its
// caches and the thread count, so it is measured, as the algorithms of 3x3
// convolutions are (dnnl_tuning.cc). Steps measured in their own sequence see
// the cache state their producers leave; timing a step alone in a loop keeps
// each thread's half of the data in its own cache and flatters N threads.
//
// TESSERA_DNNL_STEP_THREADS=team keeps every step on the session's threads
// (no measurement), =one runs every candidate on one thread: for A/B runs and
// tests of the one-thread primitives.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <omp.h>

#include "backends/dnnl/dnnl_region.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {
namespace {

enum class StepThreadsMode { kMeasure, kTeam, kOne };

StepThreadsMode step_threads_mode() {
  const char* value = std::getenv("TESSERA_DNNL_STEP_THREADS");
  if (!value || !*value || std::strcmp(value, "measure") == 0) return StepThreadsMode::kMeasure;
  if (std::strcmp(value, "team") == 0) return StepThreadsMode::kTeam;
  if (std::strcmp(value, "one") == 0) return StepThreadsMode::kOne;
  throw_user_error("TESSERA_DNNL_STEP_THREADS is '", value, "': expected measure, team or one");
}

/// Measurement time a region may take beyond its two warm-up runs: rounds of
/// both configurations fit in it, from one to kMaxRounds.
constexpr double kBudgetMs = 100;
constexpr int kMaxRounds = 5;

double median(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

StepThreadsConfig pick_step_threads_config(double team, std::optional<double> mixed, std::optional<double> one) {
  // A contender other than the team must be kMargin faster: each switch from one-thread steps back to
  // the team wakes its threads, and on a guest that packs wake-ups onto busy vCPUs (Zen 4, Linux 6.18)
  // the woken thread could stay beside its waker for whole runs, every team step then taking twice
  // as long. A BERT-shaped encoder at sequence 500 on 2 threads read 4.1-4.4 ms in most processes and
  // 5.6-7.8 in two of eight with a mix that had measured about as fast as the team; with every step
  // on the team, 4.2 in eight of eight.
  constexpr double kMargin = 0.95;
  StepThreadsConfig config = StepThreadsConfig::kTeam;
  double best = team;
  if (mixed && *mixed < kMargin * team) {
    config = StepThreadsConfig::kMixed;
    best = *mixed;
  }
  if (one && *one < std::min(best, kMargin * team)) config = StepThreadsConfig::kOne;
  return config;
}

void DnnlRegion::choose_step_threads() {
  std::vector<size_t> candidates;
  for (size_t k = 0; k < steps_.size(); ++k) {
    if (steps_[k].single_candidate) candidates.push_back(k);
  }
  if (candidates.empty()) return;
  const StepThreadsMode mode = step_threads_mode();
  auto keep_team = [&](size_t k) {
    steps_[k].single_candidate = false;
    steps_[k].single_primitive = dnnl::primitive();
  };
  auto use_one = [&](size_t k) {
    CompiledStep& step = steps_[k];
    step.threads = 1;
    if (step.single_primitive) step.primitive = std::move(step.single_primitive);
    step.single_primitive = dnnl::primitive();
  };
  if (mode == StepThreadsMode::kTeam) {
    for (size_t k : candidates) keep_team(k);
    return;
  }
  if (mode == StepThreadsMode::kOne) {
    for (size_t k : candidates) use_one(k);
    return;
  }

  std::unique_ptr<RunContext> context = make_context(true);
  std::memset(context->workspace->data(), 0, context->workspace->size());
  std::vector<std::unique_ptr<Buffer>> boundary;  // inputs and outputs: zeros
  for (size_t s = 0; s < program_.slots.size(); ++s) {
    const Slot::Kind kind = program_.slots[s].kind;
    if (kind != Slot::Kind::kInput && kind != Slot::Kind::kOutput) continue;
    boundary.push_back(std::make_unique<Buffer>(std::max<size_t>(descs_[s].get_size(), 64)));
    context->slots[s].set_data_handle(boundary.back()->data());
  }
  bind_views(*context);

  std::vector<std::vector<double>> one(steps_.size()), team(steps_.size());
  std::vector<char> chosen(steps_.size(), 0);  // steps the per-step times put on one thread
  enum Config { kAllTeam, kAllOne, kChosen };
  // One run of the region: candidates on the session's threads, on one, or as chosen; records the
  // candidates' times in the first two. Returns its milliseconds.
  auto run = [&](Config config, bool record) {
    omp_set_num_threads(num_threads_);
    const auto begin = std::chrono::steady_clock::now();
    for (size_t k = 0; k < steps_.size(); ++k) {
      const bool measured = steps_[k].single_candidate;
      const bool on_one = measured && (config == kAllOne || (config == kChosen && chosen[k]));
      const auto start = std::chrono::steady_clock::now();
      execute_step(k, *context, on_one ? 1 : steps_[k].threads);
      if (!measured || !record || config == kChosen) continue;
      context->stream.wait();
      (on_one ? one : team)[k].push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    context->stream.wait();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  };
  bool any_chosen = false;
  std::vector<double> all_team, mixed, all_one;
  try {
    const double warm = run(kAllTeam, false) + run(kAllOne, false);
    const int rounds = std::clamp(static_cast<int>(kBudgetMs / std::max(warm, 1e-3)), 1, kMaxRounds);
    for (int r = 0; r < rounds; ++r) {
      run(kAllTeam, true);
      run(kAllOne, true);
    }
    for (size_t k : candidates) {
      steps_[k].single_ms = median(one[k]);
      steps_[k].team_ms = median(team[k]);
      chosen[k] = steps_[k].single_ms <= steps_[k].team_ms;
      any_chosen |= chosen[k] != 0;
    }
    // The per-step times miss what a mix costs: a step on the session's threads after one-thread
    // steps may find the other threads asleep. The mix is kept only where whole runs of it are
    // faster than runs with every step on the session's threads. Where every step has a one-thread
    // form (a small region), runs on one thread throughout are a third contender: they never wake
    // another core.
    const bool whole_on_one = std::all_of(steps_.begin(), steps_.end(), [](const CompiledStep& c) {
      return c.single_candidate || c.threads == 1 || c.view;
    });
    for (int r = 0; (any_chosen || whole_on_one) && r < std::max(rounds, 3); ++r) {
      all_team.push_back(run(kAllTeam, false));
      if (any_chosen) mixed.push_back(run(kChosen, false));
      if (whole_on_one) all_one.push_back(run(kAllOne, false));
    }
  } catch (const dnnl::error&) {
    omp_set_num_threads(num_threads_);
    for (size_t k : candidates) keep_team(k);  // a run failed: nothing changes
    return;
  }
  omp_set_num_threads(num_threads_);
  const StepThreadsConfig config =
      all_team.empty() ? StepThreadsConfig::kTeam  // no step chose one thread, and the region is not small
                       : pick_step_threads_config(median(all_team), any_chosen ? std::optional<double>(median(mixed)) : std::nullopt,
                                                  all_one.empty() ? std::nullopt : std::optional<double>(median(all_one)));
  const bool keep_mix = config == StepThreadsConfig::kMixed, keep_one = config == StepThreadsConfig::kOne;
  if (keep_one) {
    whole_one_ms_ = median(all_one);
    whole_team_ms_ = any_chosen ? std::min(median(all_team), median(mixed)) : median(all_team);
  }
  for (size_t k : candidates) {
    if (keep_one || (keep_mix && chosen[k])) {
      use_one(k);
    } else {
      keep_team(k);
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  free_contexts_.push_back(std::move(context));  // the first run reuses its workspace
}

}  // namespace tessera::dnnl_backend
