// Native kernels of the detection/segmentation vision ops: NonMaxSuppression,
// RoiAlign and GridSample. Each follows the ONNX specification's reference
// semantics (as ONNX Runtime implements them), element by element.
#include <algorithm>
#include <limits>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/reduction_internal.h"
#include "backends/native/kernels/signal_internal.h"

namespace tessera::native {
namespace {

// ---- NonMaxSuppression ----------------------------------------------------

/// A box as (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2.
struct Corners {
  double y1, x1, y2, x2;
};

Corners corners_of(const double* box, bool center_point) {
  if (center_point) {  // [x_center, y_center, width, height]
    return {box[1] - box[3] / 2, box[0] - box[2] / 2, box[1] + box[3] / 2, box[0] + box[2] / 2};
  }
  // [y1, x1, y2, x2] with either diagonal pair of corners.
  return {std::min(box[0], box[2]), std::min(box[1], box[3]), std::max(box[0], box[2]), std::max(box[1], box[3])};
}

/// True when the boxes overlap by more than the threshold. A box of zero area
/// suppresses nothing and is never suppressed.
bool overlaps_more_than(const Corners& a, const Corners& b, double iou_threshold) {
  const double area_a = (a.y2 - a.y1) * (a.x2 - a.x1);
  const double area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0) return false;
  const double height = std::max(0.0, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const double width = std::max(0.0, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const double intersection = height * width;
  return intersection / (area_a + area_b - intersection) > iou_threshold;
}

/// Greedy suppression of `candidates` (best first) against the boxes kept so far: at most `max_kept`.
/// A kept box suppresses a candidate only where their x ranges overlap (IoU above a threshold >= 0
/// needs a positive intersection), so the kept boxes are bucketed by x1 and a candidate looks only in
/// the buckets from its x1 less the widest candidate's width to its x2. Detection models suppress boxes
/// of all classes in one call with each class's boxes shifted apart (torchvision's batched_nms):
/// 27,000 boxes of SSDlite-320 took 250 ms comparing every candidate with every kept box. Non-finite
/// coordinates, or few candidates, take the plain loop (the same boxes kept, in the same order).
std::vector<int64_t> greedy_suppression(const std::vector<Corners>& corners, const std::vector<int64_t>& candidates,
                                        int64_t max_kept, double iou_threshold) {
  std::vector<int64_t> kept;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, widest = 0;
  bool finite = true;
  for (int64_t i : candidates) {
    const Corners& c = corners[static_cast<size_t>(i)];
    finite &= std::isfinite(c.x1) && std::isfinite(c.x2);
    lo = std::min(lo, c.x1);
    hi = std::max(hi, c.x2);
    widest = std::max(widest, c.x2 - c.x1);
  }
  const size_t n = candidates.size();
  if (!finite || n < 64 || !(hi > lo)) {
    for (int64_t i : candidates) {
      if (static_cast<int64_t>(kept.size()) >= max_kept) break;
      bool suppressed = false;
      for (int64_t k : kept) {
        if (overlaps_more_than(corners[static_cast<size_t>(i)], corners[static_cast<size_t>(k)], iou_threshold)) {
          suppressed = true;
          break;
        }
      }
      if (!suppressed) kept.push_back(i);
    }
    return kept;
  }
  const size_t buckets = std::min<size_t>(n / 4, size_t{1} << 16);
  const double width = (hi - lo) / static_cast<double>(buckets);
  auto bucket_of = [&](double x) {
    const double b = std::floor((x - lo) / width);
    return b <= 0 ? size_t{0} : std::min(buckets - 1, static_cast<size_t>(b));
  };
  std::vector<std::vector<int64_t>> grid(buckets);
  for (int64_t i : candidates) {
    if (static_cast<int64_t>(kept.size()) >= max_kept) break;
    const Corners& c = corners[static_cast<size_t>(i)];
    bool suppressed = false;
    for (size_t b = bucket_of(c.x1 - widest), last = bucket_of(c.x2); b <= last && !suppressed; ++b) {
      for (int64_t k : grid[b]) {
        if (overlaps_more_than(c, corners[static_cast<size_t>(k)], iou_threshold)) {
          suppressed = true;
          break;
        }
      }
    }
    if (!suppressed) {
      kept.push_back(i);
      grid[bucket_of(c.x1)].push_back(i);
    }
  }
  return kept;
}

double optional_scalar(KernelContext& ctx, size_t i, double fallback) {
  if (!ctx.has_input(i) || ctx.input(i).numel() == 0) return fallback;
  return view_double_at(ctx.input(i), 0);
}

// ---- RoiAlign --------------------------------------------------------------

/// One bilinear sample of a [H, W] plane at (y, x): the four corner offsets and
/// weights. Samples more than one pixel outside the plane get weight 0.
struct BilinearSample {
  int64_t offsets[4] = {0, 0, 0, 0};
  double weights[4] = {0, 0, 0, 0};
};

BilinearSample bilinear_sample(double y, double x, int64_t height, int64_t width) {
  BilinearSample s;
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width)) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x), y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<double>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<double>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const double ly = y - static_cast<double>(y_low), lx = x - static_cast<double>(x_low);
  const double hy = 1 - ly, hx = 1 - lx;
  s.offsets[0] = y_low * width + x_low;
  s.offsets[1] = y_low * width + x_high;
  s.offsets[2] = y_high * width + x_low;
  s.offsets[3] = y_high * width + x_high;
  s.weights[0] = hy * hx;
  s.weights[1] = hy * lx;
  s.weights[2] = ly * hx;
  s.weights[3] = ly * lx;
  return s;
}

/// Four floats (one xmm register at the baseline ISA this file is built for); four of them hold a block
/// of sixteen channels' sums in registers (a 64-byte vector type was kept on the stack here).
typedef float Quad __attribute__((vector_size(16)));

inline Quad load_quad(const float* p) {
  Quad v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

/// One roi in X's coordinates: its image, first corner, bin size and each bin's grid of samples.
struct RoiGeometry {
  int64_t batch;
  double start_h, start_w, bin_h, bin_w;
  int64_t grid_h, grid_w;

  /// Sample (iy, ix) of bin (ph, pw) on a [height, width] plane.
  BilinearSample sample(int64_t ph, int64_t pw, int64_t iy, int64_t ix, int64_t height, int64_t width) const {
    const double y = start_h + ph * bin_h + (iy + 0.5) * bin_h / static_cast<double>(grid_h);
    const double x = start_w + pw * bin_w + (ix + 0.5) * bin_w / static_cast<double>(grid_w);
    return bilinear_sample(y, x, height, width);
  }
  /// What a bin's sum is divided by (at least 1).
  int64_t samples_per_bin() const { return std::max<int64_t>(grid_h * grid_w, 1); }
};

/// RoiAlign's float32 average on a channels-last copy of X: a bin's bilinear samples add their weighted
/// corner pixels across a block of channels at once (contiguous floats: vector multiply-adds into
/// registers), where the plane-by-plane loop gathers four scalars a channel. The copy costs one pass over
/// X, so roi_align takes it where the samples' corner reads outnumber X's elements. Sums are float32, as
/// ONNX Runtime's are (a bin's average of at most a few hundred samples in its usual sizes).
void roi_align_channels_last(KernelContext& ctx, const float* in, int64_t batch, int64_t channels, int64_t height,
                             int64_t width, const std::vector<RoiGeometry>& geometry, int64_t out_h, int64_t out_w,
                             float* out) {
  const int64_t plane = height * width;
  std::vector<float> last(static_cast<size_t>(batch * plane * channels));
  ctx.pool().parallel_for(batch * height, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / height, h = bh % height;
      for (int64_t c = 0; c < channels; ++c) {
        const float* src = in + (b * channels + c) * plane + h * width;
        float* dst = last.data() + (b * plane + h * width) * channels + c;
        for (int64_t w = 0; w < width; ++w) dst[w * channels] = src[w];
      }
    }
  });
  const int64_t bins = out_h * out_w;
  // A bin's taps (a sample's corner: weight and pixel) are gathered first; then, a block of kBlock
  // channels at a time, the bin's sums stay in registers over all its taps and are stored once.
  constexpr int64_t kBlock = 16;
  struct Tap {
    float weight;
    const float* pixel;
  };
  ctx.pool().parallel_for(static_cast<int64_t>(geometry.size()), 1, [&](int64_t begin, int64_t end) {
    std::vector<Tap> taps;
    for (int64_t r = begin; r < end; ++r) {
      const RoiGeometry& g = geometry[static_cast<size_t>(r)];
      const float* image = last.data() + g.batch * plane * channels;
      const float inverse = 1.0f / static_cast<float>(g.samples_per_bin());
      float* dst = out + r * channels * bins;
      for (int64_t ph = 0; ph < out_h; ++ph) {
        for (int64_t pw = 0; pw < out_w; ++pw) {
          taps.clear();
          for (int64_t iy = 0; iy < g.grid_h; ++iy) {
            for (int64_t ix = 0; ix < g.grid_w; ++ix) {
              const BilinearSample sample = g.sample(ph, pw, iy, ix, height, width);
              for (int j = 0; j < 4; ++j) {
                const float weight = static_cast<float>(sample.weights[j]);
                if (weight != 0.0f) taps.push_back({weight, image + sample.offsets[j] * channels});
              }
            }
          }
          const int64_t bin = ph * out_w + pw;
          int64_t c0 = 0;
          for (; c0 + kBlock <= channels; c0 += kBlock) {
            Quad a = {}, b = {}, c = {}, d = {};
            for (const Tap& tap : taps) {
              a += tap.weight * load_quad(tap.pixel + c0);
              b += tap.weight * load_quad(tap.pixel + c0 + 4);
              c += tap.weight * load_quad(tap.pixel + c0 + 8);
              d += tap.weight * load_quad(tap.pixel + c0 + 12);
            }
            const Quad sums[4] = {a * inverse, b * inverse, c * inverse, d * inverse};
            for (int64_t k = 0; k < kBlock; ++k) dst[(c0 + k) * bins + bin] = sums[k / 4][k % 4];
          }
          for (; c0 < channels; ++c0) {
            float sum = 0.0f;
            for (const Tap& tap : taps) sum += tap.weight * tap.pixel[c0];
            dst[c0 * bins + bin] = sum * inverse;
          }
        }
      }
    }
  });
}

template <typename T>
void roi_align(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& rois = ctx.input(1);
  const TensorView& batch_indices = ctx.input(2);
  if (x.rank() != 4) ctx.fail("X must be [N, C, H, W], got ", shape_to_string(x.shape));
  if (rois.rank() != 2 || rois.shape[1] != 4) ctx.fail("rois must be [num_rois, 4], got ", shape_to_string(rois.shape));
  const int64_t num_rois = rois.shape[0];
  if (batch_indices.numel() != num_rois) ctx.fail("batch_indices has ", batch_indices.numel(), " values for ", num_rois, " rois");
  const int64_t batch = x.shape[0], channels = x.shape[1], height = x.shape[2], width = x.shape[3];
  const AttributeMap& attrs = ctx.attrs();
  const int64_t out_h = attrs.get_int_or("output_height", 1), out_w = attrs.get_int_or("output_width", 1);
  const int64_t sampling_ratio = attrs.get_int_or("sampling_ratio", 0);
  const double scale = attrs.get_float_or("spatial_scale", 1.0f);
  const bool max_mode = attrs.get_string_or("mode", "avg") == "max";
  const bool half_pixel = attrs.get_string_or("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const double offset = half_pixel ? 0.5 : 0.0;
  const T* in = x.as<T>();
  T* out = ctx.output(0).as<T>();
  std::vector<RoiGeometry> geometry(static_cast<size_t>(num_rois));
  double corner_reads = 0;  // of all rois' samples, per channel
  for (int64_t r = 0; r < num_rois; ++r) {
    const int64_t b = view_int_at(batch_indices, r);
    if (b < 0 || b >= batch) ctx.fail("batch index ", b, " of roi ", r, " is out of range for batch ", batch);
    const double start_w = view_double_at(rois, r * 4 + 0) * scale - offset;
    const double start_h = view_double_at(rois, r * 4 + 1) * scale - offset;
    double roi_w = view_double_at(rois, r * 4 + 2) * scale - offset - start_w;
    double roi_h = view_double_at(rois, r * 4 + 3) * scale - offset - start_h;
    if (!half_pixel) {  // the legacy mode forces rois to be at least 1x1
      roi_w = std::max(roi_w, 1.0);
      roi_h = std::max(roi_h, 1.0);
    }
    const double bin_h = roi_h / static_cast<double>(out_h), bin_w = roi_w / static_cast<double>(out_w);
    const double grid_h = sampling_ratio > 0 ? static_cast<double>(sampling_ratio) : std::ceil(roi_h / static_cast<double>(out_h));
    const double grid_w = sampling_ratio > 0 ? static_cast<double>(sampling_ratio) : std::ceil(roi_w / static_cast<double>(out_w));
    // A roi whose samples could not be counted in memory (NaN or huge coordinates) is a user error here,
    // where the loops below would run for ever.
    if (!(grid_h * grid_w * static_cast<double>(out_h * out_w) <= 1e9)) {
      ctx.fail("roi ", r, " needs ", grid_h, " x ", grid_w, " samples a bin (adaptive sampling of its coordinates)");
    }
    geometry[static_cast<size_t>(r)] = {b, start_h, start_w, bin_h, bin_w, static_cast<int64_t>(grid_h), static_cast<int64_t>(grid_w)};
    corner_reads += 4 * grid_h * grid_w * static_cast<double>(out_h * out_w);
  }
  if constexpr (std::is_same_v<T, float>) {
    if (!max_mode && channels > 1 && corner_reads >= static_cast<double>(batch * height * width)) {
      roi_align_channels_last(ctx, in, batch, channels, height, width, geometry, out_h, out_w, out);
      return;
    }
  }
  for (int64_t r = 0; r < num_rois; ++r) {
    const RoiGeometry& geo = geometry[static_cast<size_t>(r)];
    const int64_t b = geo.batch;
    const double count = static_cast<double>(geo.samples_per_bin());
    // The sample positions are the same for every channel.
    std::vector<BilinearSample> samples;
    samples.reserve(static_cast<size_t>(out_h * out_w * geo.grid_h * geo.grid_w));
    for (int64_t ph = 0; ph < out_h; ++ph)
      for (int64_t pw = 0; pw < out_w; ++pw)
        for (int64_t iy = 0; iy < geo.grid_h; ++iy)
          for (int64_t ix = 0; ix < geo.grid_w; ++ix) samples.push_back(geo.sample(ph, pw, iy, ix, height, width));
    const int64_t per_bin = geo.grid_h * geo.grid_w;
    ctx.pool().parallel_for(channels, 1, [&](int64_t c_begin, int64_t c_end) {
      for (int64_t c = c_begin; c < c_end; ++c) {
        const T* plane = in + (b * channels + c) * height * width;
        T* dst = out + (r * channels + c) * out_h * out_w;
        for (int64_t bin = 0; bin < out_h * out_w; ++bin) {
          double sum = 0, max = 0;
          for (int64_t k = 0; k < per_bin; ++k) {
            const BilinearSample& s = samples[static_cast<size_t>(bin * per_bin + k)];
            if (max_mode) {
              // ONNX's max mode takes the largest weighted corner, not the interpolated value.
              double v = s.weights[0] * static_cast<double>(plane[s.offsets[0]]);
              for (int j = 1; j < 4; ++j) v = std::max(v, s.weights[j] * static_cast<double>(plane[s.offsets[j]]));
              max = k == 0 ? v : std::max(max, v);
            } else {
              for (int j = 0; j < 4; ++j) sum += s.weights[j] * static_cast<double>(plane[s.offsets[j]]);
            }
          }
          dst[bin] = static_cast<T>(max_mode ? max : sum / count);
        }
      }
    });
  }
}

// ---- GridSample ------------------------------------------------------------

enum class Padding { kZeros, kBorder, kReflection };

/// Reflects a coordinate into [low, high] (repeatedly, like a mirror pair).
double reflect(double x, double low, double high) {
  const double range = high - low;
  if (range <= 0) return low;
  if (x < low) {
    const double d = low - x;
    const int64_t n = static_cast<int64_t>(d / range);
    const double r = d - static_cast<double>(n) * range;
    return n % 2 == 0 ? low + r : high - r;
  }
  if (x > high) {
    const double d = x - high;
    const int64_t n = static_cast<int64_t>(d / range);
    const double r = d - static_cast<double>(n) * range;
    return n % 2 == 0 ? high - r : low + r;
  }
  return x;
}

struct GridPlane {
  int64_t height, width;
  Padding padding;
  double bounds[4];  // x_min, y_min, x_max, y_max of the valid continuous coordinates

  template <typename T>
  double at(const T* plane, int64_t row, int64_t col) const {
    if (padding == Padding::kZeros) {
      if (row < 0 || row >= height || col < 0 || col >= width) return 0;
    } else if (padding == Padding::kBorder) {
      row = std::clamp<int64_t>(row, 0, height - 1);
      col = std::clamp<int64_t>(col, 0, width - 1);
    } else {
      col = static_cast<int64_t>(reflect(static_cast<double>(col), bounds[0], bounds[2]));
      row = static_cast<int64_t>(reflect(static_cast<double>(row), bounds[1], bounds[3]));
      row = std::clamp<int64_t>(row, 0, height - 1);
      col = std::clamp<int64_t>(col, 0, width - 1);
    }
    return static_cast<double>(plane[row * width + col]);
  }
};

/// Keys' cubic convolution weights (a = -0.75) for the 4 taps around a point at fraction t.
void cubic_weights(double t, double w[4]) {
  constexpr double a = -0.75;
  const double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
  w[0] = ((a * x0 - 5 * a) * x0 + 8 * a) * x0 - 4 * a;
  w[1] = ((a + 2) * x1 - (a + 3)) * x1 * x1 + 1;
  w[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
  w[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
}

template <typename T>
void grid_sample(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& grid = ctx.input(1);
  if (x.rank() != 4) throw_unsupported(ctx.node().describe(), ": only 4-D X (N, C, H, W) is supported, got ", shape_to_string(x.shape));
  if (grid.rank() != 4 || grid.shape[3] != 2 || grid.shape[0] != x.shape[0]) {
    ctx.fail("grid must be [N, H_out, W_out, 2] with N = ", x.shape[0], ", got ", shape_to_string(grid.shape));
  }
  const AttributeMap& attrs = ctx.attrs();
  const std::string mode = attrs.get_string_or("mode", "bilinear");
  const std::string padding_name = attrs.get_string_or("padding_mode", "zeros");
  const bool align_corners = attrs.get_int_or("align_corners", 0) != 0;
  const int64_t batch = x.shape[0], channels = x.shape[1], height = x.shape[2], width = x.shape[3];
  const int64_t out_h = grid.shape[1], out_w = grid.shape[2];
  GridPlane g{height, width,
              padding_name == "border" ? Padding::kBorder : padding_name == "reflection" ? Padding::kReflection : Padding::kZeros,
              {}};
  const double w = static_cast<double>(width), h = static_cast<double>(height);
  if (align_corners) {
    g.bounds[0] = 0, g.bounds[1] = 0, g.bounds[2] = w - 1, g.bounds[3] = h - 1;
  } else {
    g.bounds[0] = -0.5, g.bounds[1] = -0.5, g.bounds[2] = w - 0.5, g.bounds[3] = h - 0.5;
  }
  auto denormalize = [&](double v, double length) {
    return align_corners ? (v + 1) / 2 * (length - 1) : ((v + 1) * length - 1) / 2;
  };
  const T* in = x.as<T>();
  const T* grid_data = grid.as<T>();
  T* out = ctx.output(0).as<T>();
  ctx.pool().parallel_for(batch * channels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t nc = begin; nc < end; ++nc) {
      const int64_t n = nc / channels;
      const T* plane = in + nc * height * width;
      T* dst = out + nc * out_h * out_w;
      for (int64_t p = 0; p < out_h * out_w; ++p) {
        double px = denormalize(static_cast<double>(grid_data[(n * out_h * out_w + p) * 2]), w);
        double py = denormalize(static_cast<double>(grid_data[(n * out_h * out_w + p) * 2 + 1]), h);
        if (mode == "nearest") {
          px = std::nearbyint(px);
          py = std::nearbyint(py);
        }
        if (px < g.bounds[0] || px > g.bounds[2] || py < g.bounds[1] || py > g.bounds[3]) {
          if (g.padding == Padding::kBorder) {
            px = std::clamp(px, 0.0, w - 1);
            py = std::clamp(py, 0.0, h - 1);
          } else if (g.padding == Padding::kReflection) {
            px = reflect(px, g.bounds[0], g.bounds[2]);
            py = reflect(py, g.bounds[1], g.bounds[3]);
          }
        }
        double value;
        if (mode == "nearest") {
          value = g.at(plane, static_cast<int64_t>(py), static_cast<int64_t>(px));
        } else if (mode == "bilinear") {
          const int64_t x1 = static_cast<int64_t>(std::floor(px)), y1 = static_cast<int64_t>(std::floor(py));
          const double dx1 = px - static_cast<double>(x1), dy1 = py - static_cast<double>(y1);
          const double dx2 = 1 - dx1, dy2 = 1 - dy1;
          value = dy2 * (dx2 * g.at(plane, y1, x1) + dx1 * g.at(plane, y1, x1 + 1)) +
                  dy1 * (dx2 * g.at(plane, y1 + 1, x1) + dx1 * g.at(plane, y1 + 1, x1 + 1));
        } else {
          const int64_t x0 = static_cast<int64_t>(std::floor(px)) - 1, y0 = static_cast<int64_t>(std::floor(py)) - 1;
          double wx[4], wy[4];
          cubic_weights(px - static_cast<double>(x0) - 1, wx);
          cubic_weights(py - static_cast<double>(y0) - 1, wy);
          value = 0;
          for (int i = 0; i < 4; ++i) {
            double row = 0;
            for (int j = 0; j < 4; ++j) row += wx[j] * g.at(plane, y0 + i, x0 + j);
            value += wy[i] * row;
          }
        }
        dst[p] = static_cast<T>(value);
      }
    }
  });
}

}  // namespace

void non_max_suppression_kernel(KernelContext& ctx) {
  const TensorView& boxes = ctx.input(0);
  const TensorView& scores = ctx.input(1);
  if (boxes.rank() != 3 || boxes.shape[2] != 4) ctx.fail("boxes must be [batch, boxes, 4], got ", shape_to_string(boxes.shape));
  if (scores.rank() != 3 || scores.shape[0] != boxes.shape[0] || scores.shape[2] != boxes.shape[1]) {
    ctx.fail("scores ", shape_to_string(scores.shape), " must be [batch, classes, boxes] for boxes ", shape_to_string(boxes.shape));
  }
  const int64_t batch = boxes.shape[0], num_boxes = boxes.shape[1], classes = scores.shape[1];
  const int64_t max_per_class = ctx.has_input(2) && ctx.input(2).numel() > 0 ? view_int_at(ctx.input(2), 0) : 0;
  const double iou_threshold = optional_scalar(ctx, 3, 0.0);
  const bool has_score_threshold = ctx.has_input(4) && ctx.input(4).numel() > 0;
  const double score_threshold = optional_scalar(ctx, 4, 0.0);
  if (iou_threshold < 0 || iou_threshold > 1) ctx.fail("iou_threshold ", iou_threshold, " must be in [0, 1]");
  const bool center_point = ctx.attrs().get_int_or("center_point_box", 0) != 0;

  std::vector<int64_t> selected;  // (batch, class, box) triples
  std::vector<Corners> corners(static_cast<size_t>(num_boxes));
  std::vector<double> class_scores(static_cast<size_t>(num_boxes));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < num_boxes; ++i) {
      double box[4];
      for (int k = 0; k < 4; ++k) box[k] = view_double_at(boxes, (b * num_boxes + i) * 4 + k);
      corners[static_cast<size_t>(i)] = corners_of(box, center_point);
    }
    for (int64_t c = 0; c < classes; ++c) {
      const int64_t score_base = (b * classes + c) * num_boxes;
      std::vector<int64_t> candidates;
      for (int64_t i = 0; i < num_boxes; ++i) {
        class_scores[static_cast<size_t>(i)] = view_double_at(scores, score_base + i);
        if (!has_score_threshold || class_scores[static_cast<size_t>(i)] > score_threshold) candidates.push_back(i);
      }
      // Highest score first; equal scores keep the lower box index first.
      std::stable_sort(candidates.begin(), candidates.end(), [&](int64_t l, int64_t r) {
        return class_scores[static_cast<size_t>(l)] > class_scores[static_cast<size_t>(r)];
      });
      const std::vector<int64_t> kept = greedy_suppression(corners, candidates, max_per_class, iou_threshold);
      for (int64_t i : kept) selected.insert(selected.end(), {b, c, i});
    }
  }
  TensorView& out = ctx.allocate_output(0, DType::kInt64, {static_cast<int64_t>(selected.size() / 3), 3});
  std::copy(selected.begin(), selected.end(), out.as<int64_t>());
}

void roi_align_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, roi_align_kernel)) return;
  dispatch_float(ctx.input(0).dtype, [&](auto tag) { roi_align<decltype(tag)>(ctx); });
}

void grid_sample_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, grid_sample_kernel)) return;
  if (ctx.input(1).dtype != ctx.input(0).dtype) {
    throw_unsupported(ctx.node().describe(), ": grid dtype ", dtype_name(ctx.input(1).dtype), " differs from X's ",
                      dtype_name(ctx.input(0).dtype));
  }
  dispatch_float(ctx.input(0).dtype, [&](auto tag) { grid_sample<decltype(tag)>(ctx); });
}

}  // namespace tessera::native
