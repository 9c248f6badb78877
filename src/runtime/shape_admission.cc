// The runtime's choice, for a region compiled with open dims whose backend
// prepares state per input shape (oneDNN creates primitives for concrete dims
// only: about 5 ms of code generation for a text recogniser's four
// convolutions, more than running them), between preparing that state for a
// call's unseen shapes and running the region's nodes on native, which runs
// every shape as it comes. A trace of mostly new shapes (OCR crops of every
// width, requests of every length) would otherwise pay a preparation per call.
//
// Measured, not guessed: the region's preparations' cost C, and its backend's
// and native's run time per element of its inputs, from the calls that did
// each (d and n at a call's size). An unseen shape is prepared
// - while what preparing costs is not known yet (the first preparation may do
//   once what later ones reuse, timing oneDNN's convolution algorithms, so the
//   second is the first sample; a model run at one shape prepares it at once,
//   as before; native is then run to measure it, twice, since its first run
//   also makes what its kernels keep),
// - and then by ski rental: each call at the shape run on native pays n - d
//   more than the backend would, and the call at which what it has paid would
//   reach C prepares it. Whatever the trace, a shape costs at most about twice
//   what the better of "prepare at once" and "never prepare" would have cost
//   it (the last kRememberedShapes shapes run on native are remembered).
// TESSERA_SHAPE_ADMISSION=eager prepares every unseen shape at once.
#include "runtime/shape_admission.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tessera {
namespace {

/// An average weighted toward the latest sample (none yet: negative).
void blend(double& average, double sample) {
  average = average < 0 ? sample : 0.5 * average + 0.5 * sample;
}

}  // namespace

bool ShapeAdmission::eager() {
  const char* mode = std::getenv("TESSERA_SHAPE_ADMISSION");  // (read at unseen shapes only)
  return mode && std::strcmp(mode, "eager") == 0;
}

ShapeAdmission::Choice ShapeAdmission::choose(const std::vector<Shape>& dims, int64_t work) {
  if (eager()) return Choice::kPrepare;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto seen = ran_native_.find(dims);
  double paid = seen == ran_native_.end() ? 0.0 : seen->second.paid_ms;
  bool prepare = prepare_ms_ < 0;  // (what a preparation costs is not known yet)
  double gap = 0;
  if (!prepare && native_ms_per_work_ >= 0) {
    // Ski rental: each run on native at this shape pays n - d more than the backend would (native's
    // time less the backend's); once what the shape has paid so far and this run would pay reaches C,
    // the preparation's cost, it is prepared.
    gap = std::max(0.0, (native_ms_per_work_ - backend_ms_per_work_) * static_cast<double>(work));
    prepare = paid + gap >= prepare_ms_;
  }
  // A preparation's cost falls as the backend's own caches fill (oneDNN keeps generated kernels: ResNet-18's
  // trunk took 90-180 ms for its first few shapes, 9-11 ms after twenty), and only preparing measures it:
  // after refresh_after_ runs on native in a row one unseen shape is prepared anyway, the gap doubling
  // (up to 64) while that does not change the choice; not where the preparation costs more than
  // kRefreshRatio of what native pays more at the call (it would have to fall that much to matter).
  if (!prepare && ++natives_in_a_row_ > refresh_after_ && gap * kRefreshRatio >= prepare_ms_) {
    prepare = refreshing_ = true;
    refresh_after_ = std::min<int64_t>(2 * refresh_after_, 64);
  } else if (prepare && !refreshing_) {
    refresh_after_ = kFirstRefresh;
  }
  if (prepare) {
    natives_in_a_row_ = 0;
    if (seen != ran_native_.end()) ran_native_.erase(seen);  // (its entry in order_ ages out unused)
    return Choice::kPrepare;
  }
  paid += gap;
  ++insertions_;
  if (seen != ran_native_.end()) {
    seen->second = {paid, insertions_};
  } else {
    ran_native_.emplace(dims, Remembered{paid, insertions_});
  }
  order_.emplace_back(dims, insertions_);
  while (order_.size() > kRememberedShapes) {
    const auto found = ran_native_.find(order_.front().first);
    if (found != ran_native_.end() && found->second.insertion == order_.front().second) ran_native_.erase(found);
    order_.pop_front();
  }
  return Choice::kNative;
}

void ShapeAdmission::prepared(int64_t work, double prepare_ms, double run_ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The first preparation may do once what later ones reuse (oneDNN convolutions' algorithms are timed
  // at the first shape: 0.2-0.7 s for ResNet-18), so it is not a sample of what a shape costs.
  if (preparations_++ > 0) blend(prepare_ms_, prepare_ms);
  refreshing_ = false;
  if (work > 0) blend(backend_ms_per_work_, run_ms / static_cast<double>(work));
}

void ShapeAdmission::ran_native(int64_t work, double ms) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The first run on native also makes what its kernels keep for later runs (packed weights, Winograd's
  // transformed weights, scratch memory's first pages): a ResNet-18 trunk's took 146 ms where later ones
  // at that size took about 21, and as the one sample it sent every later shape to be prepared. Not a
  // sample, then: the next unseen shape runs on native again and measures it.
  if (native_runs_++ == 0) return;
  if (work > 0) blend(native_ms_per_work_, ms / static_cast<double>(work));
}

}  // namespace tessera
