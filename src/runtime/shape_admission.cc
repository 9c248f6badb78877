// The runtime's choice, for a region compiled with open dims whose backend
// prepares state per input shape (oneDNN creates primitives for concrete dims
// only: about 5 ms of code generation for a text recogniser's four
// convolutions, more than running them), between preparing that state for a
// call's unseen shapes and running the region's nodes on native, which runs
// every shape as it comes. A trace of mostly new shapes (OCR crops of every
// width, requests of every length) would otherwise pay a preparation per call.
// A backend may prepare in two tiers: quickly (oneDNN: direct convolutions on
// JIT kernels that are cheap to create) or in full (its fastest kernels, which
// it also moves a quick shape up to once it keeps coming).
//
// Measured, not guessed: each tier's preparation cost (C_quick, C_full), the
// backend's run times after it (q, f) and native's (n), each at the size (the
// elements of the region's inputs) it ran at, from the calls that did each.
// Run times are not proportional to the size, so native and a tier are
// compared where native ran nearest the call's size, and that ratio scales
// the tier's time at the call's size (RunTimes, gap). An unseen shape is
// prepared
// - while those are not known yet: the first preparation may do once what
//   later ones reuse (timing oneDNN's convolution algorithms) and is no
//   sample, the second is made in full and the third quickly (a model run at
//   one shape prepares it at once, as before); native is then run to measure
//   it, twice, since its first run also makes what its kernels keep;
// - and then by ski rental with two things to buy: each call at the shape
//   run on native pays n - q more than the quick tier would and n - f more
//   than the full one, and at the call where what the shape has paid would
//   reach a tier's C it is prepared in that tier (in full where both would).
//   Whatever the trace, a shape costs at most about twice what the better of
//   "prepare at once" and "never prepare" would have cost it (the last
//   kRememberedShapes shapes run on native are remembered). Where the quick
//   tier runs no faster than native (oneDNN's direct JIT against native's
//   Winograd on AVX-512), only the full tier can pay, and a shape that keeps
//   coming gets it; with one rate for both, a hot shape stayed on native.
// TESSERA_SHAPE_ADMISSION=eager prepares every unseen shape at once (quickly).
#include "runtime/shape_admission.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace tessera {
namespace {

/// An average weighted toward the latest sample (none yet: negative).
void blend(double& average, double sample) {
  average = average < 0 ? sample : 0.5 * average + 0.5 * sample;
}

}  // namespace

void ShapeAdmission::RunTimes::add(int64_t work, double ms) {
  if (work <= 0) return;
  runs_.emplace_back(work, ms);
  if (runs_.size() > kKept) runs_.pop_front();
}

std::pair<int64_t, double> ShapeAdmission::RunTimes::nearest(int64_t work) const {
  std::pair<int64_t, double> best = runs_.back();
  double best_distance = -1;
  for (auto it = runs_.rbegin(); it != runs_.rend(); ++it) {  // (the latest first: it wins ties)
    const double distance = std::fabs(std::log(static_cast<double>(it->first) / static_cast<double>(work)));
    if (best_distance < 0 || distance < best_distance) best = *it, best_distance = distance;
  }
  return best;
}

double ShapeAdmission::RunTimes::at(int64_t work) const {
  const auto [size, ms] = nearest(work);
  return ms * static_cast<double>(work) / static_cast<double>(size);
}

double ShapeAdmission::gap(const TierCosts& tier, int64_t work) const {
  if (tier.runs.empty() || native_.empty() || work <= 0) return 0;
  // Native and the tier compared at the size where native was measured nearest this call's, and that
  // ratio applied to the tier's time at this call's size: run times are not proportional to the size
  // (fixed costs weigh more at small sizes), so native measured on small calls against the backend on
  // large ones would read as slower than it is (a text recogniser then prepared nearly every width, at
  // a millisecond each, for runs no faster than native's).
  const auto [size, native_ms] = native_.nearest(work);
  const double tier_there = tier.runs.at(size);
  if (tier_there <= 0) return 0;
  return std::max(0.0, tier.runs.at(work) * (native_ms / tier_there - 1));
}

bool ShapeAdmission::eager() {
  const char* mode = std::getenv("TESSERA_SHAPE_ADMISSION");  // (read at unseen shapes only)
  return mode && std::strcmp(mode, "eager") == 0;
}

ShapeAdmission::Choice ShapeAdmission::choose(const std::vector<Shape>& dims, int64_t work) {
  if (eager()) return Choice::kPrepare;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto seen = ran_native_.find(dims);
  const int64_t calls = (seen == ran_native_.end() ? 0 : seen->second.calls) + 1;  // this one included
  const TierCosts& quick = quick_is_full_ ? full_ : quick_;
  Choice choice = Choice::kNative;
  // What running this call on native pays more than each tier would (zero where it would not).
  double gap_quick = 0, gap_full = 0;
  if (preparations_ == 0) {
    choice = Choice::kPrepare;  // the first: the backend measures its algorithms and lowers in full
  } else if (full_.prepare_ms < 0) {
    choice = Choice::kPrepareFull;
  } else if (quick.prepare_ms < 0) {
    choice = Choice::kPrepare;
  } else if (!native_.empty()) {
    gap_quick = gap(quick, work);
    gap_full = gap(full_, work);
    // Ski rental, with two things to buy: once what the shape's calls on native have paid more than a
    // tier would reaches that tier's preparation, it is prepared in it. Full where both would (the shape
    // keeps coming: a quick tier slower than native, as oneDNN's direct JIT is on AVX-512, would keep
    // it on native forever), else quick (it moves up by itself if the shape keeps coming).
    if (!quick_is_full_ && static_cast<double>(calls) * gap_full >= full_.prepare_ms) {
      choice = Choice::kPrepareFull;
    } else if (static_cast<double>(calls) * gap_quick >= quick.prepare_ms) {
      choice = Choice::kPrepare;
    }
  }
  // A preparation's cost falls as the backend's own caches fill (oneDNN keeps generated kernels: ResNet-18's
  // trunk took 90-180 ms for its first few shapes, 9-11 ms after twenty), and only preparing measures it:
  // after refresh_after_ runs on native in a row one unseen shape is prepared anyway, the gap doubling
  // (up to 64) while that does not change the choice; not where the preparation costs more than
  // kRefreshRatio of what native pays more at the call (it would have to fall that much to matter).
  if (choice == Choice::kNative && ++natives_in_a_row_ > refresh_after_) {
    if (gap_quick > 0 && gap_quick * kRefreshRatio >= quick.prepare_ms) {
      choice = Choice::kPrepare;
    } else if (!quick_is_full_ && gap_full > 0 && gap_full * kRefreshRatio >= full_.prepare_ms) {
      choice = Choice::kPrepareFull;
    }
    if (choice != Choice::kNative) {
      refreshing_ = true;
      refresh_after_ = std::min<int64_t>(2 * refresh_after_, 64);
    }
  } else if (choice != Choice::kNative && !refreshing_) {
    refresh_after_ = kFirstRefresh;
  }
  if (choice != Choice::kNative) {
    natives_in_a_row_ = 0;
    if (seen != ran_native_.end()) ran_native_.erase(seen);  // (its entry in order_ ages out unused)
    return choice;
  }
  ++insertions_;
  if (seen != ran_native_.end()) {
    seen->second = {calls, insertions_};
  } else {
    ran_native_.emplace(dims, Remembered{calls, insertions_});
  }
  order_.emplace_back(dims, insertions_);
  while (order_.size() > kRememberedShapes) {
    const auto found = ran_native_.find(order_.front().first);
    if (found != ran_native_.end() && found->second.insertion == order_.front().second) ran_native_.erase(found);
    order_.pop_front();
  }
  return Choice::kNative;
}

void ShapeAdmission::prepared(int64_t work, Choice asked, Tier made, double prepare_ms, double run_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  refreshing_ = false;
  // The first preparation is no sample: it may do once what later ones reuse (oneDNN convolutions'
  // algorithms are timed at the first shape: 0.2-0.7 s for ResNet-18), and its run makes what later
  // runs keep (workspace pages).
  if (preparations_++ == 0) return;
  TierCosts& tier = made == Tier::kFull ? full_ : quick_;
  blend(tier.prepare_ms, prepare_ms);
  tier.runs.add(work, run_ms);
  if (asked == Choice::kPrepare) quick_is_full_ = made == Tier::kFull;
}

void ShapeAdmission::tiered_up(double prepare_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  blend(full_.prepare_ms, prepare_ms);
}

void ShapeAdmission::ran_native(int64_t work, double ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The first run on native also makes what its kernels keep for later runs (packed weights, Winograd's
  // transformed weights, scratch memory's first pages): a ResNet-18 trunk's took 146 ms where later ones
  // at that size took about 21, and as the one sample it sent every later shape to be prepared. Not a
  // sample, then: the next unseen shape runs on native again and measures it.
  if (native_runs_++ == 0) return;
  native_.add(work, ms);
}

}  // namespace tessera
