#include "quantize/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ir/error.h"
#include "quantize/quantize.h"

namespace tessera::quantize {

void RangeStats::add_range(const float* data, int64_t n) {
  for (int64_t k = 0; k < n; ++k) {
    const float v = data[k];
    if (!std::isfinite(v)) {
      ++non_finite_;
      continue;
    }
    if (!seen_) {
      min_ = max_ = v;
      seen_ = true;
    }
    min_ = std::min<double>(min_, v);
    max_ = std::max<double>(max_, v);
  }
}

void RangeStats::add_histogram(const float* data, int64_t n, bool absolute) {
  absolute_ = absolute;
  if (histogram_.empty()) histogram_.assign(kBins, 0);
  const double lo = absolute ? 0.0 : min_;
  const double hi = absolute ? std::max(std::fabs(min_), std::fabs(max_)) : max_;
  if (!(hi > lo)) return;
  const double per_bin = kBins / (hi - lo);
  for (int64_t k = 0; k < n; ++k) {
    const float v = data[k];
    if (!std::isfinite(v)) continue;
    const double x = absolute ? std::fabs(v) : v;
    const int bin = std::clamp(static_cast<int>((x - lo) * per_bin), 0, kBins - 1);
    ++histogram_[static_cast<size_t>(bin)];
    ++counted_;
  }
}

double RangeStats::percentile_value(double fraction) const {
  const double target = fraction * static_cast<double>(counted_);
  const double width = (max_ - min_) / kBins;
  double seen = 0;
  for (int b = 0; b < kBins; ++b) {
    const double count = static_cast<double>(histogram_[static_cast<size_t>(b)]);
    if (seen + count >= target && count > 0) {
      // Linear within the bin.
      return min_ + width * (b + (target - seen) / count);
    }
    seen += count;
  }
  return max_;
}

int entropy_threshold_bins(const std::vector<int64_t>& bins, int levels) {
  const int n = static_cast<int>(bins.size());
  if (n <= levels) return n;
  double best = std::numeric_limits<double>::infinity();
  int best_i = n;
  std::vector<double> p, q;
  for (int i = levels; i <= n; ++i) {
    // P: the first i bins, the clipped tail folded into the last.
    p.assign(bins.begin(), bins.begin() + i);
    for (int k = i; k < n; ++k) p[static_cast<size_t>(i - 1)] += static_cast<double>(bins[static_cast<size_t>(k)]);
    // Q: the first i bins merged into `levels` groups, each group's count
    // spread evenly over its non-empty bins.
    q.assign(static_cast<size_t>(i), 0.0);
    for (int g = 0; g < levels; ++g) {
      const int start = static_cast<int>(static_cast<int64_t>(g) * i / levels);
      const int end = static_cast<int>(static_cast<int64_t>(g + 1) * i / levels);
      double sum = 0;
      int nonzero = 0;
      for (int k = start; k < end; ++k) {
        sum += static_cast<double>(bins[static_cast<size_t>(k)]);
        nonzero += bins[static_cast<size_t>(k)] != 0;
      }
      for (int k = start; k < end; ++k) {
        if (bins[static_cast<size_t>(k)] != 0) q[static_cast<size_t>(k)] = sum / nonzero;
      }
    }
    double p_sum = 0, q_sum = 0;
    for (int k = 0; k < i; ++k) {
      p_sum += p[static_cast<size_t>(k)];
      q_sum += q[static_cast<size_t>(k)];
    }
    if (p_sum <= 0 || q_sum <= 0) continue;
    double kl = 0;
    for (int k = 0; k < i; ++k) {
      const double pk = p[static_cast<size_t>(k)] / p_sum;
      if (pk <= 0) continue;
      const double qk = q[static_cast<size_t>(k)] / q_sum;
      kl += qk > 0 ? pk * std::log(pk / qk) : pk * 30.0;  // a bin Q lost entirely: a large, finite penalty
    }
    if (kl < best) {
      best = kl;
      best_i = i;
    }
  }
  return best_i;
}

double RangeStats::entropy_threshold() const {
  const double top = std::max(std::fabs(min_), std::fabs(max_));
  const int levels = min_ >= 0 ? 255 : 128;  // one-sided tensors use all of uint8
  const int i = entropy_threshold_bins(histogram_, levels);
  return top * i / kBins;
}

std::pair<double, double> RangeStats::range(CalibrationMethod method, double percentile) const {
  if (!seen_) return {0.0, 0.0};
  if (method == CalibrationMethod::kMinMax || counted_ == 0) return {min_, max_};
  if (method == CalibrationMethod::kPercentile) {
    if (absolute_) throw_internal_error("percentile over an absolute histogram");
    const double tail = (1.0 - percentile / 100.0) / 2.0;
    return {percentile_value(tail), percentile_value(1.0 - tail)};
  }
  if (!absolute_) throw_internal_error("entropy over a signed histogram");
  const double t = entropy_threshold();
  return {std::max(min_, -t), std::min(max_, t)};
}

}  // namespace tessera::quantize
