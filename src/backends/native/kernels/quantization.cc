// Native QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear, and the
// registration of the quantization kernels (the integer products live in
// quantization_matmul.cc and quantization_conv.cc).
//
// The arithmetic follows ONNX's reference: QuantizeLinear divides (never
// multiplies by a reciprocal, which rounds differently) in float32 for
// float32 input and in float64 for int32 input, rounds half to even, adds the
// zero point and saturates.
#include <algorithm>
#include <type_traits>

#include "backends/native/cpu_features.h"
#include "backends/native/kernels/quantization_internal.h"
#include "ir/shape_util.h"

namespace tessera::native {
namespace {

#include "backends/native/kernels/quantization_span_body.h"

}  // namespace

QuantizeSpans quantize_spans_portable() { return {quantize_span_uint8, quantize_span_int8, float_range}; }

const QuantizeSpans& quantize_spans() {
  static const QuantizeSpans spans = cpu_features().avx512   ? quantize_spans_avx512()
                                     : cpu_features().avx2_fma ? quantize_spans_avx2()
                                                               : quantize_spans_portable();
  return spans;
}

namespace {

/// Elements as outer x channels x inner around the quantization axis; one
/// channel for per-tensor parameters.
struct AxisLayout {
  int64_t channels = 1;
  int64_t inner = 1;
};

AxisLayout axis_layout(const KernelContext& ctx, const TensorView& x, const TensorView& scale, const TensorView* zero_point) {
  AxisLayout layout;
  layout.inner = x.numel();
  if (scale.numel() == 1 && scale.rank() <= 1) {
    if (zero_point && zero_point->numel() != 1) {
      ctx.fail("zero point has shape ", shape_to_string(zero_point->shape), " but the scale is a single value");
    }
    return layout;
  }
  if (scale.rank() != 1) ctx.fail("scale has shape ", shape_to_string(scale.shape), ", expected a scalar or a 1-D tensor");
  const int64_t axis_attr = ctx.attrs().get_int_or("axis", 1);
  if (axis_attr < -x.rank() || axis_attr >= x.rank()) ctx.fail("axis ", axis_attr, " is out of range for input of rank ", x.rank());
  const int64_t axis = normalize_axis(axis_attr, x.rank());
  if (scale.shape[0] != x.shape[static_cast<size_t>(axis)]) {
    ctx.fail("scale has ", scale.shape[0], " values but axis ", axis_attr, " of input ", shape_to_string(x.shape), " has size ",
             x.shape[static_cast<size_t>(axis)]);
  }
  if (zero_point && zero_point->shape != scale.shape) {
    ctx.fail("zero point has shape ", shape_to_string(zero_point->shape), " but the scale has ", shape_to_string(scale.shape));
  }
  layout.channels = scale.shape[0];
  layout.inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < x.shape.size(); ++d) layout.inner *= x.shape[d];
  return layout;
}

/// Calls fn(channel, offset, count) over element range [begin, end) cut at
/// channel boundaries, so the per-element loop inside fn has fixed parameters.
template <typename Fn>
void for_each_channel_run(const AxisLayout& layout, int64_t begin, int64_t end, Fn&& fn) {
  while (begin < end) {
    const int64_t row = layout.inner == 0 ? 0 : begin / layout.inner;
    const int64_t row_end = std::min(end, (row + 1) * layout.inner);
    fn(row % layout.channels, begin, row_end - begin);
    begin = row_end;
  }
}

constexpr int64_t kElementGrain = 1 << 14;

std::vector<int32_t> zero_points(const TensorView* zero_point, int64_t channels) {
  std::vector<int32_t> z(static_cast<size_t>(channels), 0);
  if (zero_point) {
    for (int64_t c = 0; c < channels; ++c) z[static_cast<size_t>(c)] = static_cast<int32_t>(view_int_at(*zero_point, c));
  }
  return z;
}

template <typename T, typename Q>
void quantize_elements(const AxisLayout& layout, const T* x, const float* scale, const std::vector<int32_t>& zero_point, Q* y,
                       int64_t count, ThreadPool& pool) {
  // float32 / float32 stays float32 in the reference; int32 / float32 promotes to float64.
  using F = std::conditional_t<std::is_same_v<T, float>, float, double>;
  pool.parallel_for(count, kElementGrain, [&](int64_t begin, int64_t end) {
    for_each_channel_run(layout, begin, end, [&](int64_t c, int64_t offset, int64_t n) {
      const F s = static_cast<F>(scale[c]);
      const int32_t z = zero_point[static_cast<size_t>(c)];
      const T* xs = x + offset;
      Q* ys = y + offset;
      if constexpr (std::is_same_v<T, float>) {
        if constexpr (std::is_same_v<Q, uint8_t>) return quantize_spans().to_uint8(xs, n, s, z, ys);
        if constexpr (std::is_same_v<Q, int8_t>) return quantize_spans().to_int8(xs, n, s, z, ys);
      }
      for (int64_t i = 0; i < n; ++i) ys[i] = quantize_value<Q>(static_cast<F>(xs[i]) / s, z);
    });
  });
}

template <typename Fn>
void dispatch_quantized(DType dtype, Fn&& fn) {
  if (dtype == DType::kUInt8) return fn(uint8_t{});
  if (dtype == DType::kInt8) return fn(int8_t{});
  throw_unsupported("quantized dtype ", dtype_name(dtype), " (int8 and uint8 are supported)");
}

void quantize_linear_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& scale = ctx.input(1);
  const TensorView* zero_point = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  TensorView& y = ctx.output(0);
  const AxisLayout layout = axis_layout(ctx, x, scale, zero_point);
  const std::vector<int32_t> z = zero_points(zero_point, layout.channels);
  dispatch_quantized(y.dtype, [&](auto q_tag) {
    using Q = decltype(q_tag);
    if (x.dtype == DType::kFloat32) {
      quantize_elements(layout, x.as<float>(), scale.as<float>(), z, y.as<Q>(), x.numel(), ctx.pool());
    } else if (x.dtype == DType::kInt32) {
      quantize_elements(layout, x.as<int32_t>(), scale.as<float>(), z, y.as<Q>(), x.numel(), ctx.pool());
    } else {
      throw_unsupported(ctx.node().describe(), ": QuantizeLinear of ", dtype_name(x.dtype), " (float32 and int32 are supported)");
    }
  });
}

template <typename T>
void dequantize_elements(const AxisLayout& layout, const T* x, const float* scale, const std::vector<int32_t>& zero_point, float* y,
                         int64_t count, ThreadPool& pool) {
  pool.parallel_for(count, kElementGrain, [&](int64_t begin, int64_t end) {
    for_each_channel_run(layout, begin, end, [&](int64_t c, int64_t offset, int64_t n) {
      const float s = scale[c];
      const int32_t z = zero_point[static_cast<size_t>(c)];
      const T* xs = x + offset;
      float* ys = y + offset;
      for (int64_t i = 0; i < n; ++i) ys[i] = static_cast<float>(static_cast<int32_t>(xs[i]) - z) * s;
    });
  });
}

void dequantize_linear_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& scale = ctx.input(1);
  const TensorView* zero_point = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const AxisLayout layout = axis_layout(ctx, x, scale, zero_point);
  const std::vector<int32_t> z = zero_points(zero_point, layout.channels);
  float* y = ctx.output(0).as<float>();
  switch (x.dtype) {
    case DType::kUInt8: return dequantize_elements(layout, x.as<uint8_t>(), scale.as<float>(), z, y, x.numel(), ctx.pool());
    case DType::kInt8: return dequantize_elements(layout, x.as<int8_t>(), scale.as<float>(), z, y, x.numel(), ctx.pool());
    case DType::kInt32:
      // The spec fixes int32's zero point at 0 (int32 - zero point could overflow otherwise).
      for (int32_t v : z) {
        if (v != 0) ctx.fail("int32 input needs a zero point of 0, got ", v);
      }
      return dequantize_elements(layout, x.as<int32_t>(), scale.as<float>(), z, y, x.numel(), ctx.pool());
    default: throw_unsupported(ctx.node().describe(), ": DequantizeLinear of ", dtype_name(x.dtype), " (int8, uint8, int32 are supported)");
  }
}

/// DynamicQuantizeLinear, in the float32 steps of the spec's function body
/// (min/max widened to include 0, scale = range / 255, zero point =
/// round(clip(0 - min / scale, 0, 255))).
void dynamic_quantize_linear_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const float* xs = x.as<float>();
  const int64_t count = x.numel();
  float lo = 0.0f, hi = 0.0f;
  quantize_spans().range(xs, count, &lo, &hi);
  // An all-zero input would give 0 / 0; ONNX Runtime uses scale 1 there, and so do we.
  const float scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float zero_point_float = std::nearbyint(std::clamp(0.0f - lo / scale, 0.0f, 255.0f));
  const auto zero_point = static_cast<uint8_t>(zero_point_float);
  ctx.output(1).as<float>()[0] = scale;
  ctx.output(2).as<uint8_t>()[0] = zero_point;
  const AxisLayout layout{1, count};
  quantize_elements(layout, xs, &scale, {zero_point}, ctx.output(0).as<uint8_t>(), count, ctx.pool());
}

}  // namespace

void register_quantization_linear_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "QuantizeLinear", .run = quantize_linear_kernel});
  registry.add({.op_type = "DequantizeLinear", .run = dequantize_linear_kernel});
  registry.add({.op_type = "DynamicQuantizeLinear", .run = dynamic_quantize_linear_kernel});
}

void register_quantization_kernels(KernelRegistry& registry) {
  register_quantization_linear_kernels(registry);
  register_quantization_matmul_kernels(registry);
  register_quantization_conv_kernels(registry);
}

}  // namespace tessera::native
