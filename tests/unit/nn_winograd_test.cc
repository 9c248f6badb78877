// Native Winograd F(4x4, 3x3) (nn_conv_winograd.cc), called directly against a
// 3x3 convolution summed in double from the definition: partial tiles at the
// right and bottom, uneven pads (0-2 a side), several images, channel counts
// that fill no vector, several chunks, bias and a fused clamp, Inf and NaN
// inputs (which it leaves to the direct convolution), one
// and two threads; and the rule that sends a convolution to it. The transforms
// come in one copy per ISA: the capped suites (TESSERA_ISA) run this file on
// each one below this CPU's.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/native/kernels/nn_internal.h"
#include "test_util.h"

namespace tessera {
namespace {

using native::WinogradConv;

WinogradConv make_conv(int64_t n, int64_t cin, int64_t cout, int64_t h, int64_t w, int64_t top, int64_t left,
                       int64_t bottom, int64_t right) {
  WinogradConv s;
  s.batch = n;
  s.in_channels = cin;
  s.out_channels = cout;
  s.in_h = h;
  s.in_w = w;
  s.pad_top = top;
  s.pad_left = left;
  s.pad_bottom = bottom;
  s.pad_right = right;
  s.out_h = h + top + bottom - 2;
  s.out_w = w + left + right - 2;
  return s;
}

/// The convolution in double, and the sum of its terms' magnitudes (what Winograd's rounding scales with).
void reference(const WinogradConv& s, const float* x, const float* w, const float* bias, std::vector<double>& y,
               std::vector<double>& magnitude) {
  y.assign(static_cast<size_t>(s.batch * s.out_channels * s.out_h * s.out_w), 0.0);
  magnitude.assign(y.size(), 0.0);
  for (int64_t n = 0; n < s.batch; ++n) {
    for (int64_t o = 0; o < s.out_channels; ++o) {
      for (int64_t oh = 0; oh < s.out_h; ++oh) {
        for (int64_t ow = 0; ow < s.out_w; ++ow) {
          double sum = bias ? bias[o] : 0.0, size = bias ? std::fabs(bias[o]) : 0.0;
          for (int64_t c = 0; c < s.in_channels; ++c) {
            for (int64_t kh = 0; kh < 3; ++kh) {
              const int64_t ih = oh + kh - s.pad_top;
              if (ih < 0 || ih >= s.in_h) continue;
              for (int64_t kw = 0; kw < 3; ++kw) {
                const int64_t iw = ow + kw - s.pad_left;
                if (iw < 0 || iw >= s.in_w) continue;
                const double term = static_cast<double>(x[((n * s.in_channels + c) * s.in_h + ih) * s.in_w + iw]) *
                                    w[((o * s.in_channels + c) * 3 + kh) * 3 + kw];
                sum += term;
                size += std::fabs(term);
              }
            }
          }
          const size_t at = static_cast<size_t>(((n * s.out_channels + o) * s.out_h + oh) * s.out_w + ow);
          y[at] = sum;
          magnitude[at] = size;
        }
      }
    }
  }
}

struct Case {
  WinogradConv conv;
  bool bias;
  bool clamp;
};

std::string describe(const WinogradConv& s) {
  return std::to_string(s.batch) + "x" + std::to_string(s.in_channels) + "x" + std::to_string(s.in_h) + "x" +
         std::to_string(s.in_w) + " -> " + std::to_string(s.out_channels) + " channels, pads " +
         std::to_string(s.pad_top) + "," + std::to_string(s.pad_left) + "," + std::to_string(s.pad_bottom) + "," +
         std::to_string(s.pad_right);
}

TEST(NnWinograd, MatchesDoubleConvolution) {
  const Case cases[] = {
      {make_conv(1, 16, 16, 13, 17, 1, 1, 1, 1), true, false},   // partial tiles right and below
      {make_conv(2, 19, 33, 20, 9, 0, 2, 2, 0), true, true},     // uneven pads, two images, odd channels
      {make_conv(1, 24, 20, 7, 30, 2, 0, 0, 1), false, false},   // one tile row and a bit
      {make_conv(1, 17, 18, 6, 6, 0, 0, 0, 0), false, true},     // exactly one tile, no padding
      {make_conv(2, 16, 16, 118, 118, 1, 1, 1, 1), true, true},  // 60 tile rows: two chunks
      {make_conv(1, 300, 25, 10, 11, 1, 1, 1, 1), true, false},  // two K-blocks of the packed weights
  };
  for (const Case& c : cases) {
    const WinogradConv& s = c.conv;
    SCOPED_TRACE(describe(s));
    Tensor x = testing::random_float({s.batch, s.in_channels, s.in_h, s.in_w}, 11);
    Tensor w = testing::random_float({s.out_channels, s.in_channels, 3, 3}, 12);
    Tensor b = testing::random_float({s.out_channels}, 13);
    const native::GemmClamp clamp{-0.5f, 0.75f};
    std::vector<double> expected, magnitude;
    reference(s, x.as<float>(), w.as<float>(), c.bias ? b.as<float>() : nullptr, expected, magnitude);
    const native::GemmMicrokernel& kernel = native::best_gemm_microkernel();
    const native::WinogradWeights u = native::winograd_weights(kernel, w.as<float>(), s.out_channels, s.in_channels);
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::to_string(threads) + " threads");
      native::ThreadPool pool(threads);
      std::vector<float> y(expected.size(), std::numeric_limits<float>::quiet_NaN());
      ASSERT_TRUE(native::winograd_conv(s, kernel, u, x.as<float>(), c.bias ? b.as<float>() : nullptr, y.data(), pool,
                                        c.clamp ? &clamp : nullptr));
      int64_t failures = 0;
      for (size_t i = 0; i < y.size() && failures < 5; ++i) {
        const double want = c.clamp ? std::min(std::max(expected[i], -0.5), 0.75) : expected[i];
        // F(4x4, 3x3) rounds within a few units in the last place of its terms' magnitudes (a direct sum:
        // about a tenth of that); a written NaN (every output starts as one) or a wrong term is far outside.
        if (!(std::fabs(y[i] - want) <= 4e-6 * magnitude[i] + 1e-6)) {
          ADD_FAILURE() << "output " << i << ": " << y[i] << ", expected " << want << " (terms' magnitude "
                        << magnitude[i] << ")";
          ++failures;
        }
      }
    }
  }
}

// Winograd would spread an Inf or NaN to every output of the tiles that read it; numpy and PyTorch give
// it only to the outputs whose window reads it. winograd_conv refuses such an input, and Conv (which then
// runs directly) matches the definition exactly: NaN where the window reads the NaN, +-Inf or NaN where it
// reads the Inf, finite elsewhere.
TEST(NnWinograd, InfAndNanReachOnlyTheOutputsThatReadThem) {
  const WinogradConv s = make_conv(1, 16, 16, 20, 20, 1, 1, 1, 1);  // 25 tiles a image: 2 images make 50
  ASSERT_TRUE(native::winograd_conv_worthwhile(make_conv(2, 16, 16, 20, 20, 1, 1, 1, 1)));
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    SCOPED_TRACE(std::isnan(bad) ? "NaN" : "Inf");
    Tensor x = testing::random_float({2, 16, 20, 20}, 21);
    Tensor w = testing::random_float({16, 16, 3, 3}, 22);
    x.as<float>()[((1 * 16 + 5) * 20 + 9) * 20 + 10] = bad;  // image 1, channel 5, row 9, column 10
    const native::GemmMicrokernel& kernel = native::best_gemm_microkernel();
    const auto u = native::winograd_weights(kernel, w.as<float>(), 16, 16);
    native::ThreadPool pool(2);
    std::vector<float> y(2 * 16 * 20 * 20);
    WinogradConv two = s;
    two.batch = 2;
    EXPECT_FALSE(native::winograd_conv(two, kernel, u, x.as<float>(), nullptr, y.data(), pool, nullptr));

    testing::OneOpGraph spec{.op_type = "Conv"};
    spec.attrs.set("pads", Attribute::of_ints({1, 1, 1, 1}));
    spec.inputs.push_back(x);
    spec.constants.push_back({1, w});
    const Tensor out = testing::run_one_op(spec, 2)[0];
    std::vector<double> expected, magnitude;
    reference(two, x.as<float>(), w.as<float>(), nullptr, expected, magnitude);
    for (size_t i = 0; i < expected.size(); ++i) {
      const float got = out.as<float>()[i];
      if (std::isfinite(expected[i])) {
        ASSERT_TRUE(std::isfinite(got)) << "output " << i << " reads no Inf or NaN but is " << got;
        ASSERT_NEAR(got, expected[i], 4e-6 * magnitude[i] + 1e-6) << "output " << i;
      } else {
        ASSERT_FALSE(std::isfinite(got)) << "output " << i << " reads the Inf or NaN but is " << got;
      }
    }
  }
}

TEST(NnWinograd, TakesTheConvolutionsWhereItPays) {
  // ResNet's 64-channel 56x56 layer: 196 tiles, a quarter of the direct multiplies.
  EXPECT_TRUE(native::winograd_conv_worthwhile(make_conv(1, 64, 64, 56, 56, 1, 1, 1, 1)));
  // Batch adds tiles: 7x7 maps (four tiles each) at batch 8 make 32, enough for 256 x 256 channels.
  EXPECT_FALSE(native::winograd_conv_worthwhile(make_conv(1, 256, 256, 7, 7, 1, 1, 1, 1)));
  EXPECT_TRUE(native::winograd_conv_worthwhile(make_conv(8, 256, 256, 7, 7, 1, 1, 1, 1)));
  // 512 x 512 channels need 128 tiles (each chunk reads 36 MB of transformed weights).
  EXPECT_FALSE(native::winograd_conv_worthwhile(make_conv(8, 512, 512, 7, 7, 1, 1, 1, 1)));
  EXPECT_FALSE(native::winograd_conv_worthwhile(make_conv(1, 512, 512, 40, 40, 1, 1, 1, 1)));  // 100 tiles
  EXPECT_TRUE(native::winograd_conv_worthwhile(make_conv(1, 512, 512, 48, 48, 1, 1, 1, 1)));   // 144
  // Too few channels for the transforms to pay for themselves.
  EXPECT_FALSE(native::winograd_conv_worthwhile(make_conv(1, 8, 64, 56, 56, 1, 1, 1, 1)));
  EXPECT_FALSE(native::winograd_conv_worthwhile(make_conv(1, 64, 3, 56, 56, 1, 1, 1, 1)));
  // Outputs of width 1 waste three quarters of each tile: the direct convolution.
  EXPECT_FALSE(native::winograd_conv_worthwhile(make_conv(1, 64, 64, 400, 1, 1, 1, 1, 1)));
  // Inconsistent geometry or negative pads: never.
  WinogradConv wrong = make_conv(1, 64, 64, 56, 56, 1, 1, 1, 1);
  wrong.out_w += 1;
  EXPECT_FALSE(native::winograd_conv_worthwhile(wrong));
  EXPECT_FALSE(native::winograd_conv_worthwhile(make_conv(1, 64, 64, 56, 56, -1, 1, 1, 1)));
}

}  // namespace
}  // namespace tessera
