// The oneDNN backend's own max pooling loop (dnnl_max_pool.cc) on nChw8c and
// nChw16c, called directly: against a plain loop over the NCHW indices, with
// NaN in some windows (the loop must propagate it, as ONNX Runtime and the
// native kernel do; a plain maxps would keep the other operand), and the
// layouts and steps it must leave to oneDNN. The graph-level checks (ceil
// mode, dilations, padded channel blocks, nothing runs on oneDNN's pooling)
// are in tests/python/test_slow_kernels.py.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backends/dnnl/dnnl_internal.h"

namespace tessera::testing {
namespace {

using dnnl_backend::MaxPoolPlan;
using dnnl_backend::memory;
using dnnl_backend::Step;
using dnnl_backend::StepKind;

Step pooling_step(int64_t k, int64_t s, int64_t pad) {
  Step step;
  step.kind = StepKind::kPooling;
  step.algorithm = static_cast<int32_t>(dnnl::algorithm::pooling_max);
  step.ints = {s, s, k, k, 0, 0, pad, pad, pad, pad};
  return step;
}

/// Index of (n, c, h, w) in an nChw{block}c buffer of `channels` (padded) channels.
size_t blocked_index(int64_t n, int64_t c, int64_t h, int64_t w, int64_t channels, int64_t rows, int64_t cols, int64_t block) {
  return static_cast<size_t>((((n * (channels / block) + c / block) * rows + h) * cols + w) * block + c % block);
}

TEST(DnnlMaxPool, BlockedLoopMatchesPlainLoopAndPropagatesNan) {
  for (const memory::format_tag tag : {memory::format_tag::nChw8c, memory::format_tag::nChw16c}) {
    const int64_t block = tag == memory::format_tag::nChw8c ? 8 : 16;
    const int64_t n_images = 2, channels = 32, rows = 9, cols = 7, k = 3, s = 2, pad = 1;
    const int64_t out_rows = (rows + 2 * pad - k) / s + 1, out_cols = (cols + 2 * pad - k) / s + 1;
    const memory::desc src({n_images, channels, rows, cols}, memory::data_type::f32, tag);
    const memory::desc dst({n_images, channels, out_rows, out_cols}, memory::data_type::f32, tag);
    const std::optional<MaxPoolPlan> plan = dnnl_backend::max_pool_plan(pooling_step(k, s, pad), {src, dst});
    ASSERT_TRUE(plan.has_value()) << block;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    std::vector<float> x(static_cast<size_t>(n_images * channels * rows * cols));
    for (float& v : x) v = normal(rng);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    x[blocked_index(0, 3, 3, 3, channels, rows, cols, block)] = nan;   // inside four windows
    x[blocked_index(1, 17, 0, 0, channels, rows, cols, block)] = nan;  // a corner: one window
    x[blocked_index(1, 9, 2, 2, channels, rows, cols, block)] = -nan;  // NaN with the sign bit
    std::vector<float> y(static_cast<size_t>(n_images * channels * out_rows * out_cols), 0.0f);
    dnnl_backend::run_max_pool(*plan, x.data(), y.data());
    int nan_windows = 0;
    for (int64_t n = 0; n < n_images; ++n) {
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t oh = 0; oh < out_rows; ++oh) {
          for (int64_t ow = 0; ow < out_cols; ++ow) {
            float expected = -std::numeric_limits<float>::infinity();
            bool saw_nan = false;
            for (int64_t i = 0; i < k; ++i) {
              for (int64_t j = 0; j < k; ++j) {
                const int64_t h = oh * s - pad + i, w = ow * s - pad + j;
                if (h < 0 || h >= rows || w < 0 || w >= cols) continue;
                const float v = x[blocked_index(n, c, h, w, channels, rows, cols, block)];
                saw_nan |= std::isnan(v);
                if (v > expected) expected = v;
              }
            }
            const float got = y[blocked_index(n, c, oh, ow, channels, out_rows, out_cols, block)];
            if (saw_nan) {
              ++nan_windows;
              EXPECT_TRUE(std::isnan(got)) << "block " << block << " n " << n << " c " << c << " at " << oh << "," << ow;
            } else {
              EXPECT_EQ(got, expected) << "block " << block << " n " << n << " c " << c << " at " << oh << "," << ow;
            }
          }
        }
      }
    }
    EXPECT_EQ(nan_windows, 4 + 1 + 1) << block;  // (3,3) sits in 2x2 windows of stride 2; the others in 1 each
  }
}

TEST(DnnlMaxPool, LeavesOtherLayoutsAndStepsToOneDnn) {
  const memory::desc blocked({1, 16, 8, 8}, memory::data_type::f32, memory::format_tag::nChw8c);
  const memory::desc blocked_out({1, 16, 6, 6}, memory::data_type::f32, memory::format_tag::nChw8c);
  const memory::desc plain({1, 16, 8, 8}, memory::data_type::f32, memory::format_tag::nchw);
  const memory::desc plain_out({1, 16, 6, 6}, memory::data_type::f32, memory::format_tag::nchw);
  const memory::desc nhwc_out({1, 16, 6, 6}, memory::data_type::f32, memory::format_tag::nhwc);
  const memory::desc bytes({1, 16, 8, 8}, memory::data_type::u8, memory::format_tag::nChw8c);
  const memory::desc bytes_out({1, 16, 6, 6}, memory::data_type::u8, memory::format_tag::nChw8c);
  const Step max = pooling_step(3, 1, 0);
  EXPECT_TRUE(dnnl_backend::max_pool_plan(max, {blocked, blocked_out}).has_value());
  EXPECT_FALSE(dnnl_backend::max_pool_plan(max, {plain, plain_out}).has_value());
  EXPECT_FALSE(dnnl_backend::max_pool_plan(max, {blocked, nhwc_out}).has_value());
  EXPECT_FALSE(dnnl_backend::max_pool_plan(max, {bytes, bytes_out}).has_value());
  Step average = max;
  average.algorithm = static_cast<int32_t>(dnnl::algorithm::pooling_avg_exclude_padding);
  EXPECT_FALSE(dnnl_backend::max_pool_plan(average, {blocked, blocked_out}).has_value());
}

}  // namespace
}  // namespace tessera::testing
