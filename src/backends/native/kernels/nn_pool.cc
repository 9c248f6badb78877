// Native pooling kernels: MaxPool (with Indices), AveragePool, LpPool and the
// Global forms. Windows are walked directly, one (N, C) plane per task; a
// float32 2-D MaxPool pools its planes row by row with this CPU's vector
// kernels (nn_pool_rows.h).
#define TESSERA_POOL_ROWS_NAMESPACE baseline
#include "backends/native/kernels/nn_pool_rows.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/native/cpu_features.h"
#include "backends/native/dispatch.h"
#include "backends/native/kernels/nn_internal.h"
#include "ir/ops/nn_internal.h"

namespace tessera::native {
namespace {

/// Pool geometry with the spatial dims padded to three (D, H, W).
struct PoolShape : WindowGeometry3 {
  int64_t planes = 0;
};

PoolShape pool_shape(const KernelContext& ctx) {
  const Shape& x = ctx.input(0).shape;
  const size_t rank = x.size() - 2;
  if (rank > 3) throw_unsupported(ctx.node().describe(), ": pooling over ", rank, " spatial dims (at most 3 are supported)");
  const std::vector<int64_t> in(x.begin() + 2, x.end());
  PoolShape s;
  static_cast<WindowGeometry3&>(s) = as_three_dims(window_geometry(ctx.node(), in, ctx.attrs().get_ints_or("kernel_shape", {}), true));
  s.planes = x[0] * x[1];
  return s;
}

/// Calls visit(input_offset) for every in-bounds window element of output
/// position (od, oh, ow); returns how many window positions fall inside the
/// padded input (for count_include_pad).
template <typename Visit>
int64_t visit_window(const PoolShape& s, int64_t od, int64_t oh, int64_t ow, Visit&& visit) {
  const int64_t o[3] = {od, oh, ow};
  int64_t padded_count = 1;
  for (int d = 0; d < 3; ++d) {
    int64_t count = 0;
    for (int64_t k = 0; k < s.kernel[d]; ++k) {
      const int64_t pos = o[d] * s.stride[d] - s.pad[d] + k * s.dilation[d];
      if (pos < s.in[d] + s.pad_end[d]) ++count;
    }
    padded_count *= count;
  }
  for (int64_t kd = 0; kd < s.kernel[0]; ++kd) {
    const int64_t id = od * s.stride[0] - s.pad[0] + kd * s.dilation[0];
    if (id < 0 || id >= s.in[0]) continue;
    for (int64_t kh = 0; kh < s.kernel[1]; ++kh) {
      const int64_t ih = oh * s.stride[1] - s.pad[1] + kh * s.dilation[1];
      if (ih < 0 || ih >= s.in[1]) continue;
      for (int64_t kw = 0; kw < s.kernel[2]; ++kw) {
        const int64_t iw = ow * s.stride[2] - s.pad[2] + kw * s.dilation[2];
        if (iw < 0 || iw >= s.in[2]) continue;
        visit((id * s.in[1] + ih) * s.in[2] + iw);
      }
    }
  }
  return padded_count;
}

/// Runs fn(plane, out_index, od, oh, ow) for every output element, planes in parallel.
template <typename Fn>
void for_each_output(const PoolShape& s, ThreadPool& pool, Fn&& fn) {
  pool.parallel_for(s.planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      int64_t index = plane * s.out_size();
      for (int64_t od = 0; od < s.out[0]; ++od) {
        for (int64_t oh = 0; oh < s.out[1]; ++oh) {
          for (int64_t ow = 0; ow < s.out[2]; ++ow) fn(plane, index++, od, oh, ow);
        }
      }
    }
  });
}

template <typename Fn>
void dispatch_pool(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kInt8: return fn(int8_t{});
    case DType::kUInt8: return fn(uint8_t{});
    default: return dispatch_float(dtype, fn);
  }
}

/// Max pooling of one float64 2-D plane (float32 takes nn_pool_rows.h), row by
/// row: for each window row and column offset, a running max over the output
/// row (a strided loop) instead of walking every window. Same result as the window walk: a NaN
/// anywhere in a window gives NaN (as numpy's max and PyTorch do).
void max_pool_plane_2d(const PoolShape& s, const double* x, double* y) {
  using T = double;
  const int64_t H = s.in[1], W = s.in[2], OH = s.out[1], OW = s.out[2];
  const int64_t sw = s.stride[2];
  for (int64_t oh = 0; oh < OH; ++oh) {
    T* out = y + oh * OW;
    bool first = true;
    for (int64_t kh = 0; kh < s.kernel[1]; ++kh) {
      const int64_t ih = oh * s.stride[1] - s.pad[1] + kh * s.dilation[1];
      if (ih < 0 || ih >= H) continue;
      const T* row = x + ih * W;
      for (int64_t kw = 0; kw < s.kernel[2]; ++kw) {
        const int64_t offset = kw * s.dilation[2] - s.pad[2];
        // Output columns whose input column ow * sw + offset lies in [0, W).
        const int64_t lo = offset >= 0 ? 0 : std::min(OW, (-offset + sw - 1) / sw);
        const int64_t hi = W - offset <= 0 ? 0 : std::clamp<int64_t>((W - offset + sw - 1) / sw, lo, OW);
        if (first) {
          // Columns this first offset misses are filled by later offsets (pads < kernel);
          // -inf, not lowest(), so a window of -inf gives -inf.
          for (int64_t ow = 0; ow < OW; ++ow) out[ow] = -std::numeric_limits<T>::infinity();
          first = false;
        }
        for (int64_t ow = lo; ow < hi; ++ow) {
          const T v = row[ow * sw + offset];
          out[ow] = (v > out[ow] || v != v) ? v : out[ow];
        }
      }
    }
  }
}

using MaxPoolPlanes = void (*)(const MaxPoolPlane&, const float*, float*, int64_t, float*);

/// The float32 plane kernel for this CPU, chosen once: the one dispatch place.
MaxPoolPlanes max_pool_planes() {
  static const MaxPoolPlanes chosen = cpu_features().avx512     ? max_pool_planes_avx512
                                      : cpu_features().avx2_fma ? max_pool_planes_avx2
                                                                : baseline::max_pool_planes;
  return chosen;
}

void max_pool_kernel(KernelContext& ctx) {
  const PoolShape s = pool_shape(ctx);
  const TensorView& x = ctx.input(0);
  const bool want_indices = ctx.has_output(1);
  if (!want_indices && s.kernel[0] == 1 && s.in[0] == 1 && x.dtype == DType::kFloat32) {
    MaxPoolPlane plane;
    plane.height = s.in[1];
    plane.width = s.in[2];
    plane.out_height = s.out[1];
    plane.out_width = s.out[2];
    plane.kernel_h = s.kernel[1];
    plane.kernel_w = s.kernel[2];
    plane.stride_h = s.stride[1];
    plane.stride_w = s.stride[2];
    plane.pad_h = s.pad[1];
    plane.pad_w = s.pad[2];
    plane.dilation_h = s.dilation[1];
    plane.dilation_w = s.dilation[2];
    const float* px = x.as<float>();
    float* py = ctx.output(0).as<float>();
    const MaxPoolPlanes pool_planes = max_pool_planes();
    // A few planes a task when planes are small, so that a task is worth handing to a thread.
    const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(1, s.in_size()));
    ctx.pool().parallel_for(s.planes, grain, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> row;
      row.resize(static_cast<size_t>(2 * plane.width));
      pool_planes(plane, px + begin * s.in_size(), py + begin * s.out_size(), end - begin, row.data());
    });
    return;
  }
  if (!want_indices && s.kernel[0] == 1 && s.in[0] == 1 && x.dtype == DType::kFloat64) {
    const double* px = x.as<double>();
    double* py = ctx.output(0).as<double>();
    ctx.pool().parallel_for(s.planes, 1, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) {
        max_pool_plane_2d(s, px + plane * s.in_size(), py + plane * s.out_size());
      }
    });
    return;
  }
  const bool column_major = ctx.attrs().get_int_or("storage_order", 0) != 0;
  int64_t* indices = want_indices ? ctx.output(1).as<int64_t>() : nullptr;
  dispatch_pool(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<T>();
    T* py = ctx.output(0).as<T>();
    for_each_output(s, ctx.pool(), [&](int64_t plane, int64_t index, int64_t od, int64_t oh, int64_t ow) {
      const T* xp = px + plane * s.in_size();
      T best = std::numeric_limits<T>::lowest();
      int64_t best_at = -1;
      visit_window(s, od, oh, ow, [&](int64_t at) {
        if (best_at < 0 || xp[at] > best || xp[at] != xp[at]) {  // NaN propagates
          best = xp[at];
          best_at = at;
        }
      });
      py[index] = best;
      if (!indices) return;
      int64_t flat = best_at;
      if (column_major && best_at >= 0) {
        // Spatial index in column-major order: h + w * H (2-D), as ONNX defines storage_order=1.
        const int64_t iw = best_at % s.in[2], ih = (best_at / s.in[2]) % s.in[1], id = best_at / (s.in[2] * s.in[1]);
        flat = ih + iw * s.in[1] + id * s.in[1] * s.in[2];
      }
      indices[index] = plane * s.in_size() + flat;
    });
  });
}

void average_pool_kernel(KernelContext& ctx) {
  const PoolShape s = pool_shape(ctx);
  const bool include_pad = ctx.attrs().get_int_or("count_include_pad", 0) != 0;
  dispatch_float(ctx.input(0).dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = ctx.input(0).as<T>();
    T* py = ctx.output(0).as<T>();
    for_each_output(s, ctx.pool(), [&](int64_t plane, int64_t index, int64_t od, int64_t oh, int64_t ow) {
      const T* xp = px + plane * s.in_size();
      T sum = 0;
      int64_t count = 0;
      const int64_t padded = visit_window(s, od, oh, ow, [&](int64_t at) {
        sum += xp[at];
        ++count;
      });
      const int64_t divisor = include_pad ? padded : count;
      py[index] = divisor > 0 ? sum / static_cast<T>(divisor) : T(0);
    });
  });
}

void lp_pool_kernel(KernelContext& ctx) {
  const PoolShape s = pool_shape(ctx);
  const double p = static_cast<double>(ctx.attrs().get_int_or("p", 2));
  dispatch_float(ctx.input(0).dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = ctx.input(0).as<T>();
    T* py = ctx.output(0).as<T>();
    for_each_output(s, ctx.pool(), [&](int64_t plane, int64_t index, int64_t od, int64_t oh, int64_t ow) {
      const T* xp = px + plane * s.in_size();
      double sum = 0;
      visit_window(s, od, oh, ow, [&](int64_t at) { sum += std::pow(std::fabs(static_cast<double>(xp[at])), p); });
      py[index] = static_cast<T>(std::pow(sum, 1.0 / p));
    });
  });
}

/// Global pools: reduce each (N, C) plane to one value.
template <typename Reduce>
void global_pool(KernelContext& ctx, Reduce reduce) {
  const TensorView& x = ctx.input(0);
  const int64_t planes = x.shape[0] * x.shape[1];
  const int64_t size = planes ? x.numel() / planes : 0;
  dispatch_float(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<T>();
    T* py = ctx.output(0).as<T>();
    ctx.pool().parallel_for(planes, 16, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) py[plane] = reduce(px + plane * size, size);
    });
  });
}

void global_average_pool_kernel(KernelContext& ctx) {
  global_pool(ctx, [](const auto* x, int64_t n) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(x)>>;
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    return n ? sum / static_cast<T>(n) : T(0);
  });
}

void global_max_pool_kernel(KernelContext& ctx) {
  global_pool(ctx, [](const auto* x, int64_t n) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(x)>>;
    // From -inf, with NaN winning (std::max would drop a NaN that is not first).
    T best = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < n; ++i) best = (x[i] > best || x[i] != x[i]) && best == best ? x[i] : best;
    return best;
  });
}

void global_lp_pool_kernel(KernelContext& ctx) {
  const double p = static_cast<double>(ctx.attrs().get_int_or("p", 2));
  global_pool(ctx, [p](const auto* x, int64_t n) {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(x)>>;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::pow(std::fabs(static_cast<double>(x[i])), p);
    return static_cast<T>(std::pow(sum, 1.0 / p));
  });
}

}  // namespace

void register_nn_pool_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "MaxPool", .run = max_pool_kernel});
  registry.add({.op_type = "AveragePool", .run = average_pool_kernel});
  registry.add({.op_type = "LpPool", .run = lp_pool_kernel});
  registry.add({.op_type = "GlobalAveragePool", .run = global_average_pool_kernel});
  registry.add({.op_type = "GlobalMaxPool", .run = global_max_pool_kernel});
  registry.add({.op_type = "GlobalLpPool", .run = global_lp_pool_kernel});
}

}  // namespace tessera::native
