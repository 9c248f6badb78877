// Whether a region with open dims prepares its backend's per-shape state for
// an input shape it has not seen, or runs that call on native (see
// shape_admission.cc).
#pragma once
#include <cstdint>
#include <deque>
#include <mutex>
#include <map>
#include <utility>
#include <vector>

#include "ir/tensor.h"

namespace tessera {

/// One per open-dims region of a compiled model, shared by every run of it.
/// Thread-safe.
class ShapeAdmission {
 public:
  enum class Choice { kPrepare, kNative };
  /// How many shapes run on native are remembered (with what running them there has cost).
  static constexpr size_t kRememberedShapes = 512;

  /// The choice for a call at `dims` (the region's input shapes), which the
  /// region has not prepared; `work` is a size that its run time grows with
  /// (the elements of its inputs).
  Choice choose(const std::vector<Shape>& dims, int64_t work);
  /// After a call that prepared its shapes: `prepare_ms` preparing them, `run_ms` running after.
  void prepared(int64_t work, double prepare_ms, double run_ms);
  /// After a call that ran on native (Choice::kNative), taking `ms`.
  void ran_native(int64_t work, double ms);

  /// TESSERA_SHAPE_ADMISSION=eager: every unseen shape is prepared (what the runtime did before).
  static bool eager();

 private:
  std::mutex mutex_;
  // Measured so far (negative: not yet): the last preparations' cost, and the backend's and native's
  // run time per unit of work (each an average weighted toward the latest).
  int64_t preparations_ = 0;
  int64_t native_runs_ = 0;
  static constexpr int64_t kFirstRefresh = 4;
  static constexpr double kRefreshRatio = 4;
  int64_t natives_in_a_row_ = 0;  // unseen shapes run on native since the last one prepared
  int64_t refresh_after_ = kFirstRefresh;
  bool refreshing_ = false;       // the last preparation was one made to measure its cost again
  double prepare_ms_ = -1;
  double backend_ms_per_work_ = -1;
  double native_ms_per_work_ = -1;
  struct Remembered {
    double paid_ms;      // what running on native at the shape cost more than the backend would, so far
    uint64_t insertion;  // its latest entry in order_
  };
  std::map<std::vector<Shape>, Remembered> ran_native_;  // shapes run on native and not yet prepared
  std::deque<std::pair<std::vector<Shape>, uint64_t>> order_;  // the insertions, oldest first (the bound)
  uint64_t insertions_ = 0;
};

}  // namespace tessera
