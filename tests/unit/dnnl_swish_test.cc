// The oneDNN backend's own SiLU / swish loop (dnnl_swish.cc), called directly:
// every ISA build this CPU runs against x / (1 + e^-x) in double over a sweep
// and the edges (saturation both ways, signed zeros, infinities, NaN, tails of
// every length), and the steps and layouts it must leave to oneDNN. The
// graph-level checks (a convolution's trailing SiLU run as the loop, values
// against numpy) are in tests/python/test_slow_kernels.py.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/dnnl/dnnl_internal.h"
#include "cpu_isa.h"

namespace tessera::testing {
namespace {

using dnnl_backend::memory;
using dnnl_backend::Step;
using dnnl_backend::StepKind;

/// x * sigmoid(x) in double, with x * Sigmoid(x)'s value at -inf (NaN).
double reference_swish(float x) {
  const double v = x;
  return v / (1.0 + std::exp(-v));
}

std::vector<std::pair<std::string, dnnl_backend::SwishSpan>> builds() {
  std::vector<std::pair<std::string, dnnl_backend::SwishSpan>> b = {{"portable", dnnl_backend::swish_span_portable}};
  const auto flags = cpu_isa::cpu_flags();
  if (flags.count("avx2") && flags.count("fma")) b.push_back({"avx2", dnnl_backend::swish_span_avx2});
  if (flags.count("avx512f") && flags.count("avx512bw") && flags.count("avx512dq") && flags.count("avx512vl")) {
    b.push_back({"avx512", dnnl_backend::swish_span_avx512});
  }
  return b;
}

TEST(DnnlSwish, EveryBuildMatchesDoubleAtTheEdgesAndPropagatesNan) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(static_cast<float>(i) * 0.025f);  // [-100, 100]
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, 88.3f, 88.4f, 89.0f, -87.0f, -88.3f, -88.4f, -89.0f, 1e30f,
                  -1e30f, kInf, -kInf, std::nanf(""), -std::nanf("")}) {
    x.push_back(v);
  }
  x.push_back(std::nanf(""));  // in a vector's last lane of some build, and in the tail of another
  for (const auto& [name, span] : builds()) {
    SCOPED_TRACE(name);
    // Every length up to 40 (tails of each width) and the whole sweep, in place and not.
    for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{15}, size_t{16}, size_t{17}, size_t{33}, x.size()}) {
      const size_t offset = x.size() - n;  // the edge values sit at the end
      std::vector<float> y(n, 123.0f), in_place(x.begin() + static_cast<std::ptrdiff_t>(offset), x.end());
      span(x.data() + offset, y.data(), static_cast<int64_t>(n));
      span(in_place.data(), in_place.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) {
        const float v = x[offset + i];
        const double want = reference_swish(v);
        SCOPED_TRACE("x = " + std::to_string(v));
        ASSERT_EQ(std::isnan(y[i]), std::isnan(want) || v == -kInf);
        ASSERT_EQ(std::isnan(in_place[i]), std::isnan(y[i]));
        if (std::isnan(want) || v == -kInf) continue;
        ASSERT_EQ(y[i], in_place[i]);
        if (std::isinf(want)) {
          ASSERT_EQ(y[i], static_cast<float>(want));
          continue;
        }
        // Relative error 2e-7, and absolute 1e-34 where the value is that small (x below about -80: the
        // reciprocal of 1 + e^-x leaves float's normal range there, and the loop returns 0 past e^-x's
        // saturation).
        ASSERT_NEAR(y[i], want, std::max(2e-7 * std::abs(want), 1e-34));
      }
    }
  }
}

TEST(DnnlSwish, TheLoopRunsOnlyASiluStepWithOneLayout) {
  Step step;
  step.kind = StepKind::kEltwise;
  step.algorithm = static_cast<int32_t>(dnnl::algorithm::eltwise_swish);
  step.floats = {1.0f, 0.0f};
  const memory::desc blocked({1, 20, 5, 5}, memory::data_type::f32, memory::format_tag::nChw16c);
  const memory::desc plain({1, 20, 5, 5}, memory::data_type::f32, memory::format_tag::nchw);
  // Padding included: 32 channels of 16-blocks for 20.
  EXPECT_EQ(dnnl_backend::swish_plan(step, {blocked, blocked}), std::optional<int64_t>(32 * 25));
  EXPECT_EQ(dnnl_backend::swish_plan(step, {plain, plain}), std::optional<int64_t>(20 * 25));
  EXPECT_FALSE(dnnl_backend::swish_plan(step, {blocked, plain}));  // a reorder too: oneDNN's
  const memory::desc bf16({1, 20, 5, 5}, memory::data_type::bf16, memory::format_tag::nchw);
  EXPECT_FALSE(dnnl_backend::swish_plan(step, {bf16, bf16}));
  Step scaled = step;
  scaled.floats = {1.702f, 0.0f};  // x * sigmoid(1.702 x): not SiLU
  EXPECT_FALSE(dnnl_backend::swish_plan(scaled, {plain, plain}));
  Step fused = step;
  fused.post_ops.push_back({});
  EXPECT_FALSE(dnnl_backend::swish_plan(fused, {plain, plain}));
  Step other = step;
  other.algorithm = static_cast<int32_t>(dnnl::algorithm::eltwise_logistic);
  EXPECT_FALSE(dnnl_backend::swish_plan(other, {plain, plain}));
  // The chosen build is the widest this CPU runs (as TESSERA_ISA caps it).
  const char* cap = std::getenv("TESSERA_ISA");
  const std::string isa = cap ? cap : "";
  const auto flags = cpu_isa::cpu_flags();
  const bool avx2 = flags.count("avx2") && flags.count("fma") && flags.count("f16c") && isa != "baseline";
  const bool avx512 = avx2 && flags.count("avx512f") && flags.count("avx512bw") && flags.count("avx512dq") &&
                      flags.count("avx512vl") && isa != "avx2";
  EXPECT_EQ(dnnl_backend::swish_span(), avx512 ? dnnl_backend::swish_span_avx512
                                        : avx2 ? dnnl_backend::swish_span_avx2
                                               : dnnl_backend::swish_span_portable);
}

}  // namespace
}  // namespace tessera::testing
