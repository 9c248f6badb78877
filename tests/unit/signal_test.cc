// Unit tests of the signal family's kernels (NonMaxSuppression, RoiAlign,
// GridSample, MaxUnpool, Det, the windows, DFT, STFT, MelWeightMatrix and the
// random generators) against values worked out by hand or by plain sums here.
#include <cmath>
#include <algorithm>
#include <numeric>
#include <random>
#include <complex>
#include <numbers>

#include "ir/error.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

Tensor make_int32(Shape shape, std::vector<int32_t> values) {
  Tensor t(DType::kInt32, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.as<int32_t>()[i] = values[i];
  return t;
}

void expect_ints(const Tensor& actual, Shape shape, std::vector<int64_t> values) {
  ASSERT_EQ(actual.dtype(), DType::kInt64);
  ASSERT_EQ(actual.shape(), shape);
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(actual.as<int64_t>()[i], values[i]) << "at " << i;
}

OneOpGraph nms_graph(Tensor boxes, Tensor scores, int64_t max_out, float iou, std::optional<float> score_threshold) {
  OneOpGraph g;
  g.op_type = "NonMaxSuppression";
  g.opset = 11;
  g.inputs = {std::move(boxes), std::move(scores), make_int64({1}, {max_out}), make_float({1}, {iou})};
  if (score_threshold) g.inputs.push_back(make_float({1}, {*score_threshold}));
  return g;
}

TEST(NonMaxSuppression, HandWorkedOverlaps) {
  // Box 0: [0,0]-[2,2] (area 4). Box 1: [0,1]-[2,3] overlaps box 0 by 2: IoU 2/6 = 0.33.
  // Box 2: [0,0.5]-[2,2.5] overlaps box 0 by 3: IoU 3/5 = 0.6. Box 3 is far away.
  Tensor boxes = make_float({1, 4, 4}, {0, 0, 2, 2, 0, 1, 2, 3, 0, 0.5f, 2, 2.5f, 10, 10, 11, 11});
  Tensor scores = make_float({1, 1, 4}, {0.9f, 0.8f, 0.85f, 0.1f});
  // IoU threshold 0.5: box 2 (0.85) goes (0.6 with box 0); box 1 stays (0.33 with 0; with 2 it is never compared).
  expect_ints(run_one_op(nms_graph(boxes, scores, 10, 0.5f, std::nullopt))[0], {3, 3}, {0, 0, 0, 0, 0, 1, 0, 0, 3});
  // Threshold 0.3 also drops box 1; the score threshold 0.2 drops box 3.
  expect_ints(run_one_op(nms_graph(boxes, scores, 10, 0.3f, 0.2f))[0], {1, 3}, {0, 0, 0});
  // At most 2 per class, with the threshold high enough to keep everything: the top 2 scores.
  expect_ints(run_one_op(nms_graph(boxes, scores, 2, 0.9f, std::nullopt))[0], {2, 3}, {0, 0, 0, 0, 0, 2});
  // max_output_boxes_per_class 0 selects nothing.
  expect_ints(run_one_op(nms_graph(boxes, scores, 0, 0.5f, std::nullopt))[0], {0, 3}, {});
}

TEST(NonMaxSuppression, CenterPointBoxesMatchCornerBoxes) {
  Tensor corners = make_float({1, 3, 4}, {0, 0, 2, 2, 0, 0.5f, 2, 2.5f, 5, 5, 6, 6});
  // The same boxes as [x_center, y_center, width, height].
  Tensor centers = make_float({1, 3, 4}, {1, 1, 2, 2, 1.5f, 1, 2, 2, 5.5f, 5.5f, 1, 1});
  Tensor scores = make_float({1, 1, 3}, {0.5f, 0.7f, 0.6f});
  OneOpGraph g = nms_graph(centers, scores, 5, 0.5f, std::nullopt);
  g.attrs.set("center_point_box", Attribute::of_int(1));
  expect_ints(run_one_op(g)[0], {2, 3}, {0, 0, 1, 0, 0, 2});
  expect_ints(run_one_op(nms_graph(corners, scores, 5, 0.5f, std::nullopt))[0], {2, 3}, {0, 0, 1, 0, 0, 2});
}

/// Many boxes, as a detection model's batched suppression makes them (each class's boxes shifted apart
/// along both axes, some clustered so that they suppress each other, a few wide ones, two of zero area),
/// against a greedy suppression written here: every candidate, best first, against every kept box.
TEST(NonMaxSuppression, ManyShiftedBoxesMatchThePlainGreedyLoop) {
  const int64_t n = 3000;
  std::mt19937 rng(26);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  Tensor boxes(DType::kFloat32, {1, n, 4});
  Tensor scores(DType::kFloat32, {1, 1, n});
  float* b = boxes.as<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float shift = 330.0f * static_cast<float>(i % 40);  // 40 "classes"
    const float cx = shift + 160.0f * unit(rng), cy = shift + 160.0f * unit(rng);
    const float w = (i % 97 == 0) ? 300.0f : 4.0f + 40.0f * unit(rng), h = 4.0f + 40.0f * unit(rng);
    b[i * 4 + 0] = cy - h / 2;
    b[i * 4 + 1] = cx - w / 2;
    b[i * 4 + 2] = cy + h / 2;
    b[i * 4 + 3] = (i == 5 || i == 6) ? cx - w / 2 : cx + w / 2;  // two of zero area
    scores.as<float>()[i] = static_cast<float>(i % 7 == 0 ? 0.5 : unit(rng));  // ties too
  }
  const float iou = 0.4f;
  for (int64_t max_out : {int64_t{100000}, int64_t{700}}) {
    // The reference: stable order by score, then each candidate against all kept boxes.
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) { return scores.as<float>()[l] > scores.as<float>()[r]; });
    auto iou_of = [&](int64_t p, int64_t q) {
      const double ay1 = std::min(b[p * 4], b[p * 4 + 2]), ax1 = std::min(b[p * 4 + 1], b[p * 4 + 3]);
      const double ay2 = std::max(b[p * 4], b[p * 4 + 2]), ax2 = std::max(b[p * 4 + 1], b[p * 4 + 3]);
      const double by1 = std::min(b[q * 4], b[q * 4 + 2]), bx1 = std::min(b[q * 4 + 1], b[q * 4 + 3]);
      const double by2 = std::max(b[q * 4], b[q * 4 + 2]), bx2 = std::max(b[q * 4 + 1], b[q * 4 + 3]);
      const double area_a = (ay2 - ay1) * (ax2 - ax1), area_b = (by2 - by1) * (bx2 - bx1);
      if (area_a <= 0 || area_b <= 0) return 0.0;
      const double inter = std::max(0.0, std::min(ay2, by2) - std::max(ay1, by1)) * std::max(0.0, std::min(ax2, bx2) - std::max(ax1, bx1));
      return inter / (area_a + area_b - inter);
    };
    std::vector<int64_t> expected;
    size_t kept = 0;
    std::vector<int64_t> kept_boxes;
    for (int64_t i : order) {
      if (static_cast<int64_t>(kept) >= max_out) break;
      bool suppressed = false;
      for (int64_t k : kept_boxes) suppressed = suppressed || iou_of(i, k) > iou;
      if (suppressed) continue;
      kept_boxes.push_back(i);
      ++kept;
      expected.insert(expected.end(), {0, 0, i});
    }
    ASSERT_GT(kept, 100u);
    ASSERT_LT(kept, static_cast<size_t>(n));  // some were suppressed
    expect_ints(run_one_op(nms_graph(boxes, scores, max_out, iou, std::nullopt))[0], {static_cast<int64_t>(kept), 3}, expected);
  }
}

/// Det of a few matrices whose determinants are known in closed form.
TEST(Det, KnownMatrices) {
  OneOpGraph g;
  g.op_type = "Det";
  g.opset = 11;
  // [[2,0,0],[0,3,0],[0,0,4]] = 24; a first pivot of 0 needs a row swap: [[0,1,0],[1,0,0],[0,0,5]] = -5;
  // a singular matrix (row 3 = row 1 + row 2) = 0; [[1,2,3],[4,5,6],[7,8,10]] = -3.
  g.inputs = {make_float({4, 3, 3}, {2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 1, 0, 1, 0, 0, 0, 0, 5, 1, 2, 3, 4, 5, 6, 5, 7, 9, 1, 2, 3,
                                     4, 5, 6, 7, 8, 10})};
  expect_close(run_one_op(g)[0], make_float({4}, {24, -5, 0, -3}), 1e-5, 1e-5);
  g.inputs = {make_float({2, 3}, {1, 2, 3, 4, 5, 6})};
  EXPECT_USER_ERROR(run_one_op(g), "Det_0");
}

TEST(Det, MatchesPermutationExpansionOnRandomMatrices) {
  // The Leibniz sum over the 24 permutations of 4 elements.
  Tensor x = random_float({5, 4, 4}, 11);
  Tensor expected(DType::kFloat32, {5});
  for (int64_t b = 0; b < 5; ++b) {
    int perm[4] = {0, 1, 2, 3};
    double det = 0;
    do {
      int inversions = 0;
      for (int i = 0; i < 4; ++i)
        for (int j = i + 1; j < 4; ++j) inversions += perm[i] > perm[j];
      double term = inversions % 2 ? -1 : 1;
      for (int i = 0; i < 4; ++i) term *= x.as<float>()[b * 16 + i * 4 + perm[i]];
      det += term;
    } while (std::next_permutation(perm, perm + 4));
    expected.as<float>()[b] = static_cast<float>(det);
  }
  OneOpGraph g;
  g.op_type = "Det";
  g.inputs = {x};
  expect_close(run_one_op(g)[0], expected, 1e-5, 1e-4);
}

TEST(MaxUnpool, ScattersIntoZeros) {
  OneOpGraph g;
  g.op_type = "MaxUnpool";
  g.opset = 11;
  g.inputs = {make_float({1, 1, 2, 2}, {1, 2, 3, 4}), make_int64({1, 1, 2, 2}, {0, 3, 9, 14})};
  g.attrs.set("kernel_shape", Attribute::of_ints({2, 2}));
  g.attrs.set("strides", Attribute::of_ints({2, 2}));
  expect_close(run_one_op(g)[0], make_float({1, 1, 4, 4}, {1, 0, 0, 2, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 4, 0}));
}

TEST(GridSample, BilinearAndNearestByHand) {
  // X = [[1, 2], [3, 4]]; with align_corners the grid corners are the pixel centres.
  Tensor x = make_float({1, 1, 2, 2}, {1, 2, 3, 4});
  OneOpGraph g;
  g.op_type = "GridSample";
  g.opset = 16;
  // (x, y) = (-1, -1) -> 1; (1, 1) -> 4; (0, 0) -> centre 2.5; (0.5, -1) -> 1.75; (-3, 0) -> outside.
  g.inputs = {x, make_float({1, 1, 5, 2}, {-1, -1, 1, 1, 0, 0, 0.5f, -1, -3, 0})};
  g.attrs.set("align_corners", Attribute::of_int(1));
  expect_close(run_one_op(g)[0], make_float({1, 1, 1, 5}, {1, 4, 2.5f, 1.75f, 0}));
  g.attrs.set("padding_mode", Attribute::of_string("border"));
  expect_close(run_one_op(g)[0], make_float({1, 1, 1, 5}, {1, 4, 2.5f, 1.75f, 2}));
  g.attrs.set("mode", Attribute::of_string("nearest"));
  // Nearest rounds half to even: (0.5, 0.5) -> (0, 0); (0.75 + 0.5 = 1.25 -> 1, 0) -> 2.
  expect_close(run_one_op(g)[0], make_float({1, 1, 1, 5}, {1, 4, 1, 2, 1}));
}

TEST(RoiAlign, LinearImageAveragesToBinCentres) {
  // On X = 2*row + col (rows 0..7, cols 0..7), bilinear sampling is exact, so each
  // bin's average is the value at the bin's centre.
  Tensor x(DType::kFloat32, {1, 1, 8, 8});
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) x.as<float>()[r * 8 + c] = static_cast<float>(2 * r + c);
  OneOpGraph g;
  g.op_type = "RoiAlign";
  g.opset = 16;
  g.inputs = {x, make_float({1, 4}, {1, 1, 5, 3}), make_int64({1}, {0})};  // x1, y1, x2, y2
  g.attrs.set("output_height", Attribute::of_int(2));
  g.attrs.set("output_width", Attribute::of_int(2));
  // half_pixel: the roi is [0.5, 4.5] in x and [0.5, 2.5] in y; bin centres x 1.5, 3.5 and y 1, 2.
  expect_close(run_one_op(g)[0], make_float({1, 1, 2, 2}, {2 + 1.5f, 2 + 3.5f, 4 + 1.5f, 4 + 3.5f}), 1e-5, 1e-5);
  g.attrs.set("coordinate_transformation_mode", Attribute::of_string("output_half_pixel"));
  // No offset: roi [1, 5] x [1, 3]; centres x 2, 4 and y 1.5, 2.5.
  expect_close(run_one_op(g)[0], make_float({1, 1, 2, 2}, {3 + 2, 3 + 4, 5 + 2, 5 + 4}), 1e-5, 1e-5);
}

/// RoiAlign's average mode from the ONNX specification, in double: each bin the mean of its grid of
/// bilinear samples, a sample more than a pixel outside the image counting 0 and one within clamped to it.
std::vector<double> roi_align_reference(const Tensor& x, const std::vector<float>& rois, const std::vector<int64_t>& batch_of,
                                        int64_t out_h, int64_t out_w, int64_t sampling_ratio, double scale, bool half_pixel) {
  const int64_t channels = x.shape()[1], height = x.shape()[2], width = x.shape()[3];
  auto pixel = [&](int64_t b, int64_t c, int64_t row, int64_t col) {
    return static_cast<double>(x.as<float>()[((b * channels + c) * height + row) * width + col]);
  };
  auto sample = [&](int64_t b, int64_t c, double y, double xx) {
    if (y < -1.0 || y > static_cast<double>(height) || xx < -1.0 || xx > static_cast<double>(width)) return 0.0;
    y = std::max(y, 0.0);
    xx = std::max(xx, 0.0);
    int64_t y0 = static_cast<int64_t>(std::floor(y)), x0 = static_cast<int64_t>(std::floor(xx));
    int64_t y1 = y0 + 1, x1 = x0 + 1;
    if (y0 >= height - 1) y0 = y1 = height - 1, y = static_cast<double>(y0);
    if (x0 >= width - 1) x0 = x1 = width - 1, xx = static_cast<double>(x0);
    const double dy = y - static_cast<double>(y0), dx = xx - static_cast<double>(x0);
    return (1 - dy) * ((1 - dx) * pixel(b, c, y0, x0) + dx * pixel(b, c, y0, x1)) +
           dy * ((1 - dx) * pixel(b, c, y1, x0) + dx * pixel(b, c, y1, x1));
  };
  const double shift = half_pixel ? 0.5 : 0.0;
  std::vector<double> out;
  for (size_t r = 0; r < batch_of.size(); ++r) {
    const double x1 = rois[r * 4] * scale - shift, y1 = rois[r * 4 + 1] * scale - shift;
    double w = rois[r * 4 + 2] * scale - shift - x1, h = rois[r * 4 + 3] * scale - shift - y1;
    if (!half_pixel) w = std::max(w, 1.0), h = std::max(h, 1.0);
    const double bin_h = h / static_cast<double>(out_h), bin_w = w / static_cast<double>(out_w);
    const int64_t gh = sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(std::ceil(bin_h));
    const int64_t gw = sampling_ratio > 0 ? sampling_ratio : static_cast<int64_t>(std::ceil(bin_w));
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t ph = 0; ph < out_h; ++ph) {
        for (int64_t pw = 0; pw < out_w; ++pw) {
          double sum = 0;
          for (int64_t iy = 0; iy < gh; ++iy) {
            for (int64_t ix = 0; ix < gw; ++ix) {
              sum += sample(batch_of[r], c, y1 + ph * bin_h + (iy + 0.5) * bin_h / static_cast<double>(gh),
                            x1 + pw * bin_w + (ix + 0.5) * bin_w / static_cast<double>(gw));
            }
          }
          out.push_back(sum / static_cast<double>(std::max<int64_t>(gh * gw, 1)));
        }
      }
    }
  }
  return out;
}

TEST(RoiAlign, AveragesMatchTheSpecificationOnRandomImagesAndRois) {
  // 37 channels (no vector width divides it), two images, rois inside, across and outside the edges, tiny and
  // large; many samples (the channels-last path) and few (the plane-by-plane one), adaptive and fixed sampling,
  // both coordinate modes, 1 and 2 threads.
  std::mt19937 rng(23);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  const int64_t channels = 37, height = 13, width = 11;
  Tensor x(DType::kFloat32, {2, channels, height, width});
  for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] = value(rng);
  const std::vector<float> many = {0, 0, 10, 12,   2.5f, 3.25f, 7.75f, 9.5f,   -3, -2, 4, 5,   9, 11, 15, 16,
                                   5, 5, 5.4f, 5.2f,   1, 8, 20, 26};
  const std::vector<int64_t> many_batch = {0, 1, 1, 0, 1, 0};
  struct Case {
    std::vector<float> rois;
    std::vector<int64_t> batch;
    int64_t out_h, out_w, sampling;
    float scale;
    bool half_pixel;
  };
  const Case cases[] = {
      {many, many_batch, 3, 4, 2, 1.0f, true},
      {many, many_batch, 2, 2, 0, 0.5f, true},
      {many, many_batch, 3, 3, 0, 1.0f, false},
      {{2.5f, 3.25f, 7.75f, 9.5f}, {1}, 1, 1, 1, 1.0f, true},  // 4 reads a channel: the plane-by-plane loop
  };
  for (const Case& k : cases) {
    const auto n = static_cast<int64_t>(k.batch.size());
    OneOpGraph g;
    g.op_type = "RoiAlign";
    g.opset = 16;
    g.inputs = {x, make_float({n, 4}, k.rois), make_int64({n}, k.batch)};
    g.attrs.set("output_height", Attribute::of_int(k.out_h));
    g.attrs.set("output_width", Attribute::of_int(k.out_w));
    g.attrs.set("sampling_ratio", Attribute::of_int(k.sampling));
    g.attrs.set("spatial_scale", Attribute::of_float(k.scale));
    if (!k.half_pixel) g.attrs.set("coordinate_transformation_mode", Attribute::of_string("output_half_pixel"));
    const std::vector<double> want = roi_align_reference(x, k.rois, k.batch, k.out_h, k.out_w, k.sampling, k.scale, k.half_pixel);
    for (int threads : {1, 2}) {
      const Tensor got = run_one_op(g, threads)[0];
      ASSERT_EQ(got.shape(), (Shape{n, channels, k.out_h, k.out_w}));
      for (size_t i = 0; i < want.size(); ++i) {
        const double v = got.as<float>()[i];
        ASSERT_TRUE(std::abs(v - want[i]) <= 2e-6 + 2e-6 * std::abs(want[i]))
            << "element " << i << ": " << v << " against " << want[i] << " (case out " << k.out_h << "x" << k.out_w
            << ", sampling " << k.sampling << ", " << threads << " threads)";
      }
    }
  }
}

Tensor run_window(const std::string& op, int32_t size, int64_t periodic) {
  OneOpGraph g;
  g.op_type = op;
  g.inputs = {make_int32({}, {size})};
  g.attrs.set("periodic", Attribute::of_int(periodic));
  return run_one_op(g)[0];
}

TEST(Windows, HannHammingBlackmanValues) {
  expect_close(run_window("HannWindow", 4, 1), make_float({4}, {0, 0.5f, 1, 0.5f}));
  expect_close(run_window("HannWindow", 5, 0), make_float({5}, {0, 0.5f, 1, 0.5f, 0}));
  const float h0 = 25.0f / 46 - 21.0f / 46;
  expect_close(run_window("HammingWindow", 4, 1), make_float({4}, {h0, 25.0f / 46, 1, 25.0f / 46}));
  // Blackman at N/4: 0.42 - 0.5*cos(pi/2) + 0.08*cos(pi) = 0.34; at N/2: 0.42 + 0.5 + 0.08 = 1.
  expect_close(run_window("BlackmanWindow", 4, 1), make_float({4}, {0, 0.34f, 1, 0.34f}), 1e-6, 1e-5);
}

/// The DFT by its definition, for a [n, 2] complex signal.
std::vector<std::complex<double>> naive_dft(const std::vector<std::complex<double>>& x, int64_t n, bool inverse) {
  std::vector<std::complex<double>> out(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    std::complex<double> sum = 0;
    for (int64_t j = 0; j < n && j < static_cast<int64_t>(x.size()); ++j) {
      sum += x[static_cast<size_t>(j)] * std::polar(1.0, (inverse ? 2 : -2) * std::numbers::pi * double(j * k) / double(n));
    }
    out[static_cast<size_t>(k)] = inverse ? sum / double(n) : sum;
  }
  return out;
}

TEST(DFT, MatchesNaiveSumWithPaddingOnesidedAndInverse) {
  const int64_t batch = 3, n = 7, length = 10;
  Tensor x = random_float({batch, n, 2}, 5);
  for (int inverse = 0; inverse <= 1; ++inverse) {
    for (int onesided = 0; onesided <= 1 - inverse; ++onesided) {
      OneOpGraph g;
      g.op_type = "DFT";
      g.inputs = {x};
      g.constants = {{1, make_int64({}, {length})}};
      g.attrs.set("inverse", Attribute::of_int(inverse));
      g.attrs.set("onesided", Attribute::of_int(onesided));
      const int64_t bins = onesided ? length / 2 + 1 : length;
      Tensor expected(DType::kFloat32, {batch, bins, 2});
      for (int64_t b = 0; b < batch; ++b) {
        std::vector<std::complex<double>> signal;
        for (int64_t j = 0; j < n; ++j) signal.emplace_back(x.as<float>()[(b * n + j) * 2], x.as<float>()[(b * n + j) * 2 + 1]);
        auto spectrum = naive_dft(signal, length, inverse);
        for (int64_t k = 0; k < bins; ++k) {
          expected.as<float>()[(b * bins + k) * 2] = static_cast<float>(spectrum[static_cast<size_t>(k)].real());
          expected.as<float>()[(b * bins + k) * 2 + 1] = static_cast<float>(spectrum[static_cast<size_t>(k)].imag());
        }
      }
      expect_close(run_one_op(g)[0], expected, 1e-5, 1e-4);
    }
  }
}

TEST(DFT, PowerOfTwoFastPathMatchesNaiveSum) {
  // Lengths 16 and 64 take the radix-2 FFT; 64 also zero-pads the 40-point signal.
  const int64_t n = 40;
  Tensor x = random_float({2, n, 2}, 21);
  for (int64_t length : {16, 64}) {
    for (int inverse = 0; inverse <= 1; ++inverse) {
      OneOpGraph g;
      g.op_type = "DFT";
      g.inputs = {x};
      g.constants = {{1, make_int64({}, {length})}};
      g.attrs.set("inverse", Attribute::of_int(inverse));
      Tensor expected(DType::kFloat32, {2, length, 2});
      for (int64_t b = 0; b < 2; ++b) {
        std::vector<std::complex<double>> signal;
        for (int64_t j = 0; j < n; ++j) signal.emplace_back(x.as<float>()[(b * n + j) * 2], x.as<float>()[(b * n + j) * 2 + 1]);
        auto spectrum = naive_dft(signal, length, inverse);
        for (int64_t k = 0; k < length; ++k) {
          expected.as<float>()[(b * length + k) * 2] = static_cast<float>(spectrum[static_cast<size_t>(k)].real());
          expected.as<float>()[(b * length + k) * 2 + 1] = static_cast<float>(spectrum[static_cast<size_t>(k)].imag());
        }
      }
      expect_close(run_one_op(g)[0], expected, 1e-5, 1e-4);
    }
  }
}

TEST(DFT, RealInputAlongInnerAxis) {
  // [1, 2, 4, 1]: transform axis 2 of rows [1, 0, 0, 0] (flat spectrum) and [1, 1, 1, 1] (a spike at 0).
  OneOpGraph g;
  g.op_type = "DFT";
  g.inputs = {make_float({1, 2, 4, 1}, {1, 0, 0, 0, 1, 1, 1, 1})};
  g.attrs.set("axis", Attribute::of_int(2));
  expect_close(run_one_op(g)[0], make_float({1, 2, 4, 2}, {1, 0, 1, 0, 1, 0, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0}), 1e-6, 1e-5);
}

TEST(STFT, FramesAreWindowedDFTs) {
  const int64_t length = 20, frame = 6, step = 4;
  Tensor signal = random_float({1, length, 1}, 8);
  Tensor window = random_float({frame}, 9);
  OneOpGraph g;
  g.op_type = "STFT";
  g.inputs = {signal};
  g.constants = {{1, make_int64({}, {step})}, {2, window}};
  const int64_t frames = (length - frame) / step + 1, bins = frame / 2 + 1;
  Tensor expected(DType::kFloat32, {1, frames, bins, 2});
  for (int64_t f = 0; f < frames; ++f) {
    std::vector<std::complex<double>> x;
    for (int64_t j = 0; j < frame; ++j) x.emplace_back(double(signal.as<float>()[f * step + j]) * window.as<float>()[j], 0.0);
    auto spectrum = naive_dft(x, frame, false);
    for (int64_t k = 0; k < bins; ++k) {
      expected.as<float>()[(f * bins + k) * 2] = static_cast<float>(spectrum[static_cast<size_t>(k)].real());
      expected.as<float>()[(f * bins + k) * 2 + 1] = static_cast<float>(spectrum[static_cast<size_t>(k)].imag());
    }
  }
  expect_close(run_one_op(g)[0], expected, 1e-5, 1e-4);
}

TEST(MelWeightMatrix, SpecificationExample) {
  OneOpGraph g;
  g.op_type = "MelWeightMatrix";
  g.inputs = {make_int32({}, {8}), make_int32({}, {16}), make_int32({}, {8192}), make_float({}, {0}), make_float({}, {4096})};
  // From the ONNX specification: edges at bins 0,0,1,2,3,4,5,6,7,9 (mel-spaced, snapped down).
  std::vector<float> expected(9 * 8, 0.0f);
  const int ones[][2] = {{0, 0}, {0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 5}, {4, 6}, {5, 7}};
  for (auto [row, col] : ones) expected[static_cast<size_t>(row * 8 + col)] = 1;
  expect_close(run_one_op(g)[0], make_float({9, 8}, expected));
}

TEST(Random, SeedGivesRepeatableValuesInRange) {
  OneOpGraph g;
  g.op_type = "RandomUniform";
  g.attrs.set("shape", Attribute::of_ints({3, 50}));
  g.attrs.set("low", Attribute::of_float(2));
  g.attrs.set("high", Attribute::of_float(5));
  g.attrs.set("seed", Attribute::of_float(7));
  Tensor a = run_one_op(g)[0], b = run_one_op(g)[0];
  ASSERT_EQ(a.shape(), (Shape{3, 50}));
  expect_close(a, b, 0, 0);
  double mean = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    EXPECT_GE(a.as<float>()[i], 2);
    EXPECT_LT(a.as<float>()[i], 5);
    mean += a.as<float>()[i] / double(a.numel());
  }
  EXPECT_NEAR(mean, 3.5, 0.3);
  g.attrs.set("seed", Attribute::of_float(8));
  Tensor c = run_one_op(g)[0];
  EXPECT_NE(a.as<float>()[0], c.as<float>()[0]);

  OneOpGraph normal;
  normal.op_type = "RandomNormalLike";
  normal.inputs = {Tensor(DType::kFloat64, {2000})};
  normal.attrs.set("mean", Attribute::of_float(1));
  normal.attrs.set("scale", Attribute::of_float(2));
  Tensor n = run_one_op(normal)[0];
  ASSERT_EQ(n.dtype(), DType::kFloat64);
  double sum = 0, squares = 0;
  for (int64_t i = 0; i < n.numel(); ++i) {
    sum += n.as<double>()[i];
    squares += n.as<double>()[i] * n.as<double>()[i];
  }
  const double m = sum / 2000, variance = squares / 2000 - m * m;
  EXPECT_NEAR(m, 1, 0.2);
  EXPECT_NEAR(variance, 4, 0.6);
}

TEST(Random, BernoulliOfZeroAndOneIsExact) {
  OneOpGraph g;
  g.op_type = "Bernoulli";
  g.inputs = {make_float({6}, {0, 1, 0, 1, 1, 0})};
  g.attrs.set("dtype", Attribute::of_int(7));  // int64
  Tensor out = run_one_op(g)[0];
  expect_ints(out, {6}, {0, 1, 0, 1, 1, 0});
}

}  // namespace
}  // namespace tessera::testing
