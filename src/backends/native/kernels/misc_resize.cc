// Native kernels of Resize (opset 11+ form: X, roi, scales, sizes; Resize-10
// is normalised into it) and the legacy Upsample (X, scales).
//
// Nearest, n-linear and cubic interpolation are all separable, so the kernel
// resamples one dim at a time: for each output coordinate of a dim it first
// computes the taps (input index, weight) the way ONNX's reference
// interpolate_1d_with_x does, then applies them to [outer, in, inner] slabs,
// with the inner loop running over contiguous memory. tf_crop_and_resize
// outputs whose source coordinate falls outside the input take
// extrapolation_value; the later passes' weights sum to 1, so that value
// survives them as the reference's recursion gives it.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/reduction_internal.h"

namespace tessera::native {
namespace {

struct ResizeOptions {
  std::string mode;
  std::string coordinate_mode;
  std::string nearest_mode;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation_value = 0;
};

/// The taps of one dim: for output index o, taps_per_output (index, weight)
/// pairs starting at o * taps_per_output; outside[o] marks extrapolated outputs.
struct DimTaps {
  int64_t taps_per_output = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<char> outside;
  bool identity = false;
};

double source_coordinate(const ResizeOptions& opt, int64_t o, double scale, int64_t in, double out_length,
                         double roi_start, double roi_end) {
  const double x = static_cast<double>(o);
  const std::string& m = opt.coordinate_mode;
  if (m == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (m == "pytorch_half_pixel") return out_length > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (m == "align_corners") return out_length == 1 ? 0.0 : x * static_cast<double>(in - 1) / (out_length - 1);
  if (m == "asymmetric") return x / scale;
  if (m == "tf_crop_and_resize") {
    const double span = (roi_end - roi_start) * static_cast<double>(in - 1);
    const double start = roi_start * static_cast<double>(in - 1);
    return out_length == 1 ? span / 2 + start : x * span / (out_length - 1) + start;
  }
  throw_unsupported("Resize coordinate_transformation_mode '", m, "' is not supported");
}

std::vector<double> cubic_weights(double ratio, double a) {
  const double r = ratio, s = 1 - ratio;
  return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a, ((a + 2) * r - (a + 3)) * r * r + 1,
          ((a + 2) * s - (a + 3)) * s * s + 1, ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
}

DimTaps compute_taps(const ResizeOptions& opt, int64_t in, int64_t out, double scale, double roi_start,
                     double roi_end) {
  DimTaps taps;
  const bool nearest = opt.mode == "nearest";
  const bool cubic = opt.mode == "cubic";
  taps.taps_per_output = nearest ? 1 : (cubic ? 4 : 2);
  const int64_t n = taps.taps_per_output;
  taps.index.assign(static_cast<size_t>(out * n), 0);
  taps.weight.assign(static_cast<size_t>(out * n), 0);
  taps.outside.assign(static_cast<size_t>(out), false);
  // The reference measures coordinates against scale * in, not the rounded output size.
  const double out_length = scale * static_cast<double>(in);
  taps.identity = in == out;
  for (int64_t o = 0; o < out; ++o) {
    const double x = source_coordinate(opt, o, scale, in, out_length, roi_start, roi_end);
    const size_t base = static_cast<size_t>(o * n);
    if (opt.coordinate_mode == "tf_crop_and_resize" && (x < 0 || x > static_cast<double>(in - 1))) {
      taps.outside[static_cast<size_t>(o)] = true;
      taps.identity = false;
      continue;
    }
    const double floor_x = std::floor(x);
    const double ratio = x - floor_x;
    const int64_t left = static_cast<int64_t>(floor_x);
    if (nearest) {
      bool up = false;
      if (ratio != 0) {
        const std::string& nm = opt.nearest_mode;
        if (nm == "round_prefer_floor") {
          up = ratio > 0.5;
        } else if (nm == "round_prefer_ceil") {
          up = ratio >= 0.5;
        } else if (nm == "floor") {
          up = false;
        } else if (nm == "ceil") {
          up = true;
        } else {
          throw_unsupported("Resize nearest_mode '", nm, "' is not supported");
        }
      }
      taps.index[base] = std::clamp<int64_t>(left + (up ? 1 : 0), 0, in - 1);
      taps.weight[base] = 1;
    } else {
      std::vector<double> w = cubic ? cubic_weights(ratio, opt.cubic_a) : std::vector<double>{1 - ratio, ratio};
      const int64_t first = cubic ? left - 1 : left;
      double total = 0;
      for (int64_t t = 0; t < n; ++t) {
        const int64_t idx = first + t;
        if (opt.exclude_outside && (idx < 0 || idx >= in)) w[static_cast<size_t>(t)] = 0;
        total += w[static_cast<size_t>(t)];
      }
      for (int64_t t = 0; t < n; ++t) {
        taps.index[base + static_cast<size_t>(t)] = std::clamp<int64_t>(first + t, 0, in - 1);
        taps.weight[base + static_cast<size_t>(t)] = opt.exclude_outside ? w[static_cast<size_t>(t)] / total
                                                                        : w[static_cast<size_t>(t)];
      }
    }
    // Identity when this output reads exactly its own index with weight 1.
    for (int64_t t = 0; t < n; ++t) {
      const size_t k = base + static_cast<size_t>(t);
      if (taps.weight[k] != 0 && !(taps.index[k] == o && taps.weight[k] == 1)) taps.identity = false;
    }
  }
  return taps;
}

/// One separable pass: [outer, in, inner] -> [outer, out, inner] along the middle dim.
template <typename T>
void resample_dim(const T* src, T* dst, int64_t outer, int64_t in, int64_t inner, const DimTaps& taps,
                  int64_t out, double extrapolation, bool interpolate, ThreadPool& pool) {
  const int64_t n = taps.taps_per_output;
  if (interpolate && inner == 1) {
    // The last dim: one output element per (row, o), so the per-output setup below would cost more than
    // its few multiply-adds (DeepLabV3's final 16 -> 128 upsample: 10 ns an element). Rows at a time.
    // Weights in T, once; a zero weight's tap is skipped (as below), an outside output's taps too.
    std::vector<T> weight(taps.weight.size());
    for (size_t k = 0; k < weight.size(); ++k) weight[k] = static_cast<T>(taps.weight[k]);
    const int64_t row_grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, out * n));
    pool.parallel_for(outer, row_grain, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        const T* x = src + b * in;
        T* y = dst + b * out;
        const T* w = weight.data();
        const int64_t* index = taps.index.data();
        for (int64_t o = 0; o < out; ++o, w += n, index += n) {
          if (taps.outside[static_cast<size_t>(o)]) {
            y[o] = static_cast<T>(extrapolation);
            continue;
          }
          T sum = T(0);
          for (int64_t t = 0; t < n; ++t) {
            if (w[t] != T(0)) sum += w[t] * x[index[t]];
          }
          y[o] = sum;
        }
      }
    });
    return;
  }
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, inner * n));
  pool.parallel_for(outer * out, grain, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t b = task / out, o = task % out;
      T* y = dst + (b * out + o) * inner;
      if (taps.outside[static_cast<size_t>(o)]) {
        std::fill(y, y + inner, static_cast<T>(extrapolation));
        continue;
      }
      const T* x = src + b * in * inner;
      const size_t base = static_cast<size_t>(o * n);
      if (!interpolate) {
        const T* row = x + taps.index[base] * inner;
        std::copy(row, row + inner, y);
        continue;
      }
      std::fill(y, y + inner, T(0));
      for (int64_t t = 0; t < n; ++t) {
        const T w = static_cast<T>(taps.weight[base + static_cast<size_t>(t)]);
        if (w == T(0)) continue;
        const T* row = x + taps.index[base + static_cast<size_t>(t)] * inner;
        for (int64_t j = 0; j < inner; ++j) y[j] += w * row[j];
      }
    }
  });
}

template <typename T>
void resize_all_dims(const TensorView& x, TensorView& y, const std::vector<double>& scales,
                     const std::vector<double>& roi, const ResizeOptions& opt, ThreadPool& pool) {
  const size_t rank = x.shape.size();
  const bool interpolate = opt.mode != "nearest";
  // The passes that change something; the last one writes y directly, the others a buffer each.
  std::vector<std::pair<size_t, DimTaps>> passes;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t in = x.shape[d], out = y.shape[d];
    const double roi_start = roi.empty() ? 0.0 : roi[d], roi_end = roi.empty() ? 1.0 : roi[rank + d];
    DimTaps taps = compute_taps(opt, in, out, scales[d], roi_start, roi_end);
    if (taps.identity) continue;
    if (in == 0) throw_user_error("Resize cannot resample an empty dim to ", out);
    passes.emplace_back(d, std::move(taps));
  }
  if (passes.empty()) {
    std::copy(x.as<T>(), x.as<T>() + x.numel(), y.as<T>());
    return;
  }
  // The passes commute (up to rounding): shrinking dims first and growing ones last keeps the
  // intermediates small, and among dims growing alike the innermost first, since its pass (one output
  // element at a time) is the dearest per element while the data is still small. DeepLabV3's final
  // 21 x 16 x 16 -> 128 x 128 upsample: 1.1 -> 0.3 ms (Zen 4). Not for tf_crop_and_resize, whose
  // extrapolated outputs are defined by the reference's order of dims.
  if (opt.coordinate_mode != "tf_crop_and_resize") {
    std::stable_sort(passes.begin(), passes.end(), [&](const auto& a, const auto& b) {
      const double ra = static_cast<double>(y.shape[a.first]) / static_cast<double>(x.shape[a.first]);
      const double rb = static_cast<double>(y.shape[b.first]) / static_cast<double>(x.shape[b.first]);
      return ra != rb ? ra < rb : a.first > b.first;
    });
  }
  Shape current = x.shape;
  const T* source = x.as<T>();
  std::unique_ptr<T[]> buffer;
  for (size_t p = 0; p < passes.size(); ++p) {
    const size_t d = passes[p].first;
    const int64_t in = current[d], out = y.shape[d];
    Shape next = current;
    next[d] = out;
    const bool last = p + 1 == passes.size();
    std::unique_ptr<T[]> resampled(last ? nullptr : new T[static_cast<size_t>(shape_numel(next))]);
    T* target = last ? y.as<T>() : resampled.get();
    const AxisSplit s = split_around(current, d, d + 1);
    resample_dim<T>(source, target, s.outer, in, s.inner, passes[p].second, out, opt.extrapolation_value, interpolate,
                    pool);
    buffer = std::move(resampled);
    source = buffer.get();
    current = next;
  }
}

/// Shared by Resize and Upsample once their inputs are read.
void run_resize(KernelContext& ctx, const TensorView* scales_view, const TensorView* roi_view) {
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  const size_t rank = x.shape.size();
  ResizeOptions opt;
  opt.mode = ctx.attrs().get_string_or("mode", "nearest");
  opt.coordinate_mode = ctx.attrs().get_string_or("coordinate_transformation_mode", "half_pixel");
  opt.nearest_mode = ctx.attrs().get_string_or("nearest_mode", "round_prefer_floor");
  opt.cubic_a = ctx.attrs().get_float_or("cubic_coeff_a", -0.75f);
  opt.exclude_outside = ctx.attrs().get_int_or("exclude_outside", 0) != 0;
  opt.extrapolation_value = ctx.attrs().get_float_or("extrapolation_value", 0.0f);
  if (opt.mode != "nearest" && opt.mode != "linear" && opt.mode != "cubic") {
    throw_unsupported(ctx.node().describe(), ": Resize mode '", opt.mode, "' is not supported");
  }
  // Scales: given, or (with sizes) the ratio of output to input, as the reference does.
  std::vector<double> scales(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (scales_view && scales_view->numel() == static_cast<int64_t>(rank)) {
      scales[d] = view_double_at(*scales_view, static_cast<int64_t>(d));
    } else {
      scales[d] = x.shape[d] == 0 ? 1.0 : static_cast<double>(y.shape[d]) / static_cast<double>(x.shape[d]);
    }
  }
  std::vector<double> roi;
  if (opt.coordinate_mode == "tf_crop_and_resize") {
    if (!roi_view || roi_view->numel() != static_cast<int64_t>(2 * rank)) {
      ctx.fail("tf_crop_and_resize needs roi with ", 2 * rank, " values");
    }
    for (int64_t i = 0; i < roi_view->numel(); ++i) roi.push_back(view_double_at(*roi_view, i));
  }
  if (y.numel() == 0) return;
  try {
    // Nearest only moves elements, so any dtype goes by its size.
    if (opt.mode == "nearest") {
      dispatch_by_size(x.dtype, [&](auto tag) { resize_all_dims<decltype(tag)>(x, y, scales, roi, opt, ctx.pool()); });
    } else {
      dispatch_float(x.dtype, [&](auto tag) { resize_all_dims<decltype(tag)>(x, y, scales, roi, opt, ctx.pool()); });
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kUser) ctx.fail(e.what());
    throw;
  }
}

}  // namespace

void resize_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, resize_kernel)) return;
  const TensorView* sizes = ctx.has_input(3) && ctx.input(3).numel() > 0 ? &ctx.input(3) : nullptr;
  const TensorView* scales = !sizes && ctx.has_input(2) ? &ctx.input(2) : nullptr;
  run_resize(ctx, scales, ctx.has_input(1) ? &ctx.input(1) : nullptr);
}

void upsample_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, upsample_kernel)) return;
  run_resize(ctx, ctx.has_input(1) ? &ctx.input(1) : nullptr, nullptr);
}

}  // namespace tessera::native
