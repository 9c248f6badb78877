// Whether a region with open dims prepares its backend's per-shape state for
// an input shape it has not seen, quickly or in full, or runs that call on
// native (see shape_admission.cc).
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
  /// Prepare the shape in the backend's quick tier (cheap to make; oneDNN then lowers it in full once
  /// it has been hit a few times), prepare it in full at once, or run this call on native.
  enum class Choice { kPrepare, kPrepareFull, kNative };
  /// What a preparation made: the backend's quick tier, or its full one (also what a backend without a
  /// quick tier makes when asked for one).
  enum class Tier { kQuick, kFull };
  /// How many shapes run on native are remembered (with how often they were).
  static constexpr size_t kRememberedShapes = 512;

  /// The choice for a call at `dims` (the region's input shapes), which the
  /// region has not prepared; `work` is a size that its run time grows with
  /// (the elements of its inputs).
  Choice choose(const std::vector<Shape>& dims, int64_t work);
  /// After a call that prepared its shapes as `asked` (kPrepare or kPrepareFull), making `made`:
  /// `prepare_ms` preparing them, `run_ms` running after.
  void prepared(int64_t work, Choice asked, Tier made, double prepare_ms, double run_ms);
  /// After a call at shapes prepared in the quick tier that the backend prepared again in full on the
  /// way (oneDNN's tier-up), taking `prepare_ms`.
  void tiered_up(double prepare_ms);
  /// After a call that ran on native (Choice::kNative), taking `ms`.
  void ran_native(int64_t work, double ms);

  /// TESSERA_SHAPE_ADMISSION=eager: every unseen shape is prepared (what the runtime did before).
  static bool eager();

 private:
  /// The latest run times measured of one kind of run, at the sizes (work) they ran at.
  class RunTimes {
   public:
    static constexpr size_t kKept = 8;
    void add(int64_t work, double ms);
    bool empty() const { return runs_.empty(); }
    /// The time at `work`, scaled from the run whose size was nearest (by ratio).
    double at(int64_t work) const;
    /// The run whose size was nearest `work`.
    std::pair<int64_t, double> nearest(int64_t work) const;

   private:
    std::deque<std::pair<int64_t, double>> runs_;  // oldest first
  };
  /// What a tier's preparations have measured: their cost (an average weighted toward the latest;
  /// negative: not yet), and the backend's run times after them.
  struct TierCosts {
    double prepare_ms = -1;
    RunTimes runs;
  };
  /// What running this call on native would cost more than `tier` (0 where nothing says it would).
  double gap(const TierCosts& tier, int64_t work) const;
  std::mutex mutex_;
  int64_t preparations_ = 0;
  int64_t native_runs_ = 0;
  TierCosts quick_, full_;
  bool quick_is_full_ = false;  // a quick preparation was asked for and a full one made (no quick tier)
  RunTimes native_;
  static constexpr int64_t kFirstRefresh = 4;
  static constexpr double kRefreshRatio = 4;
  int64_t natives_in_a_row_ = 0;  // unseen shapes run on native since the last one prepared
  int64_t refresh_after_ = kFirstRefresh;
  bool refreshing_ = false;       // the last preparation was one made to measure its cost again
  struct Remembered {
    int64_t calls;       // how many calls at the shape ran on native so far
    uint64_t insertion;  // its latest entry in order_
  };
  std::map<std::vector<Shape>, Remembered> ran_native_;  // shapes run on native and not yet prepared
  std::deque<std::pair<std::vector<Shape>, uint64_t>> order_;  // the insertions, oldest first (the bound)
  uint64_t insertions_ = 0;
};

}  // namespace tessera
