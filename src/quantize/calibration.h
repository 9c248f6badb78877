// Calibration statistics of one tensor: its range over all samples and, for
// the percentile and entropy methods, a histogram over that range (a second
// pass over the samples). Non-finite values are ignored.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

namespace tessera::quantize {

enum class CalibrationMethod;

class RangeStats {
 public:
  static constexpr int kBins = 2048;

  /// First pass: the smallest and largest finite value.
  void add_range(const float* data, int64_t n);
  /// Second pass: counts in kBins equal bins over [min, max] of the first
  /// pass or, when `absolute`, of |x| over [0, max |x|] (for entropy).
  void add_histogram(const float* data, int64_t n, bool absolute);

  /// The range to quantize: [min, max] for minmax; the central `percentile`
  /// percent of the values for percentile; for entropy, the clipping
  /// threshold on |x| whose 8-bit quantized histogram is nearest to the
  /// measured one in KL divergence (TensorRT's method), intersected with [min, max].
  std::pair<double, double> range(CalibrationMethod method, double percentile) const;

  double min() const { return min_; }
  double max() const { return max_; }
  /// Whether any finite value was seen, and how many non-finite ones were skipped (first pass).
  bool seen() const { return seen_; }
  int64_t non_finite() const { return non_finite_; }

 private:
  double percentile_value(double fraction) const;  // the value below which `fraction` of the counted values lie
  double entropy_threshold() const;

  double min_ = 0, max_ = 0;
  bool seen_ = false;
  int64_t non_finite_ = 0;
  std::vector<int64_t> histogram_;
  int64_t counted_ = 0;
  bool absolute_ = false;
};

/// The threshold index (in bins, from 1 to bins.size()) whose clipped and
/// `levels`-level quantized distribution is nearest to `bins` in KL divergence.
int entropy_threshold_bins(const std::vector<int64_t>& bins, int levels);

}  // namespace tessera::quantize
