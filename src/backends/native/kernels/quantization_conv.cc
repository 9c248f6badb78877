// Native ConvInteger and QLinearConv: per (image, group),
// Y[g] (Cout/g x spatial) = W'[g] (Cout/g x Cin/g*kernel) * im2col(X'[g]) on
// the integer GEMM, where X' and W' are the zero-point-adjusted operands in
// int16. Padding reads as the zero point (0 after adjustment), as in ONNX's
// reference. Geometry comes from window_geometry, shared with Conv.
#include <algorithm>

#include "backends/native/kernels/quantization_internal.h"
#include "ir/ops/nn_internal.h"

namespace tessera::native {
namespace {

/// Conv geometry with the spatial dims padded to three (D, H, W).
struct IntegerConvShape : WindowGeometry3 {
  int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;

  int64_t in_per_group() const { return in_channels / group; }
  int64_t out_per_group() const { return out_channels / group; }
  int64_t depth() const { return in_per_group() * kernel_size(); }
  bool pointwise() const {
    for (int d = 0; d < 3; ++d) {
      if (kernel[d] != 1 || stride[d] != 1 || pad[d] != 0) return false;
    }
    return true;
  }
};

IntegerConvShape integer_conv_shape(const KernelContext& ctx, const Shape& x, const Shape& w) {
  IntegerConvShape s;
  if (x.size() < 3 || w.size() != x.size()) ctx.fail("X ", shape_to_string(x), " and W ", shape_to_string(w), " must have the same rank >= 3");
  const size_t r = x.size() - 2;
  if (r > 3) throw_unsupported(ctx.node().describe(), ": convolution over ", r, " spatial dims (at most 3 are supported)");
  s.batch = x[0];
  s.in_channels = x[1];
  s.out_channels = w[0];
  s.group = ctx.attrs().get_int_or("group", 1);
  if (s.group <= 0 || s.in_channels != w[1] * s.group || s.out_channels % s.group != 0) {
    ctx.fail("X ", shape_to_string(x), " and W ", shape_to_string(w), " do not match with group ", s.group);
  }
  std::vector<int64_t> in(x.begin() + 2, x.end()), kernel(w.begin() + 2, w.end());
  static_cast<WindowGeometry3&>(s) = as_three_dims(window_geometry(ctx.node(), in, kernel, false));
  return s;
}

/// The im2col matrix (depth x out_size) of one image's group; x points at its
/// first channel. Out-of-range taps are 0 (the adjusted zero point).
void im2col(const IntegerConvShape& s, const int16_t* x, int16_t* col) {
  const int64_t out_size = s.out_size();
  int64_t row = 0;
  for (int64_t c = 0; c < s.in_per_group(); ++c) {
    const int16_t* xc = x + c * s.in_size();
    for (int64_t kd = 0; kd < s.kernel[0]; ++kd) {
      for (int64_t kh = 0; kh < s.kernel[1]; ++kh) {
        for (int64_t kw = 0; kw < s.kernel[2]; ++kw, ++row) {
          int16_t* dst = col + row * out_size;
          const int64_t w_offset = kw * s.dilation[2] - s.pad[2];
          const int64_t sw = s.stride[2];
          // Output columns ow in [lo, hi) read inside the row: ow * sw + w_offset in [0, W).
          const int64_t lo = std::min(s.out[2], w_offset >= 0 ? 0 : (-w_offset + sw - 1) / sw);
          const int64_t hi = std::max(lo, std::min(s.out[2], s.in[2] - w_offset <= 0 ? 0 : (s.in[2] - w_offset + sw - 1) / sw));
          for (int64_t od = 0; od < s.out[0]; ++od) {
            const int64_t id = od * s.stride[0] - s.pad[0] + kd * s.dilation[0];
            for (int64_t oh = 0; oh < s.out[1]; ++oh, dst += s.out[2]) {
              const int64_t ih = oh * s.stride[1] - s.pad[1] + kh * s.dilation[1];
              if (id < 0 || id >= s.in[0] || ih < 0 || ih >= s.in[1]) {
                std::fill(dst, dst + s.out[2], int16_t{0});
                continue;
              }
              const int16_t* xrow = xc + (id * s.in[1] + ih) * s.in[2] + w_offset;
              std::fill(dst, dst + lo, int16_t{0});
              for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = xrow[ow * sw];
              std::fill(dst + hi, dst + s.out[2], int16_t{0});
            }
          }
        }
      }
    }
  }
}

/// Runs the convolution of adjusted operands; calls finish(image, oc0, rows,
/// acc) with blocks of rows x out_size accumulators (output channels oc0 ..
/// oc0+rows), in parallel. Parallel over (image, group) when the groups are
/// many and thin (depthwise), else over tiles of each (image, group)'s GEMM
/// (weights x im2col matrix, packed once per image and group).
template <typename Finish>
void integer_conv(const KernelContext& ctx, const IntegerConvShape& s, const int16_t* x, const int16_t* w, Finish&& finish) {
  const int64_t depth = s.depth(), spatial = s.out_size(), rows = s.out_per_group();
  if (!integer_gemm_depth_ok(depth)) ctx.fail("C/group x kernel size ", depth, " is too large for exact int32 accumulation");
  auto columns = [&](int64_t n, int64_t g, ScratchSlot slot) -> const int16_t* {
    const int16_t* xg = x + (n * s.in_channels + g * s.in_per_group()) * s.in_size();
    if (s.pointwise()) return xg;  // the im2col matrix of a 1x1 unpadded stride-1 conv is X itself
    int16_t* buffer = scratch<int16_t>(slot, depth * spatial);
    im2col(s, xg, buffer);
    return buffer;
  };
  const ThreadPool& pool = ctx.pool();
  const int64_t pairs = s.batch * s.group;
  if (rows * spatial < 4096 * pool.num_threads() && pairs > 1) {
    pool.parallel_for(pairs, 1, [&](int64_t begin, int64_t end) {
      int32_t* acc = scratch<int32_t>(ScratchSlot::kTaskAccumulators, rows * spatial);
      for (int64_t p = begin; p < end; ++p) {
        const int64_t n = p / s.group, g = p % s.group;
        integer_gemm(rows, spatial, depth, w + g * rows * depth, columns(n, g, ScratchSlot::kTaskColumns), acc, spatial);
        finish(n, g * rows, rows, acc);
      }
    });
    return;
  }
  int16_t* packed = scratch<int16_t>(ScratchSlot::kPacked, packed_integer_b_size(depth, spatial));
  int32_t* acc = scratch<int32_t>(ScratchSlot::kAccumulators, rows * spatial);
  const int64_t panels = (spatial + kIntegerGemmPanel - 1) / kIntegerGemmPanel;
  const int64_t panel_stride = integer_panel_stride(depth);
  for (int64_t p = 0; p < pairs; ++p) {
    const int64_t n = p / s.group, g = p % s.group;
    const int16_t* col = columns(n, g, ScratchSlot::kColumns);
    pool.parallel_for(panels, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, depth * kIntegerGemmPanel)),
                      [&](int64_t begin, int64_t end) {
                        const int64_t j0 = begin * kIntegerGemmPanel;
                        pack_integer_b(depth, std::min(spatial, end * kIntegerGemmPanel) - j0, col + j0, spatial,
                                       packed + begin * panel_stride);
                      });
    integer_gemm_packed(rows, spatial, depth, w + g * rows * depth, depth, packed, acc, spatial, pool);
    const int64_t chunk = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, spatial));
    pool.parallel_for((rows + chunk - 1) / chunk, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t r0 = t * chunk;
        finish(n, g * rows + r0, std::min(chunk, rows - r0), acc + r0 * spatial);
      }
    });
  }
}

void check_channel_count(const KernelContext& ctx, const TensorView* param, int64_t channels, const char* what) {
  if (param && param->numel() != 1 && param->numel() != channels) {
    ctx.fail(what, " has ", param->numel(), " values, expected 1 or ", channels, " (one per output channel)");
  }
}

/// Constant weights with a constant (or absent) zero point, widened at compile time.
struct WidenedWeights {
  Shape shape;
  std::vector<int16_t> data;
};

/// ConvInteger / QLinearConv with constant weights (input kW) and a constant or
/// absent zero point (input kZeroPoint): the weights widened once (PrepareFn).
template <size_t kW, size_t kZeroPoint>
std::shared_ptr<void> prepare_weights(const Node& node, const std::vector<const Tensor*>& constants,
                                      const std::vector<TensorType>& /*input_types*/) {
  const std::optional<ConstantIntegerWeight> w = constant_integer_weight(node, constants, kW, kZeroPoint);
  if (!w || w->weight->shape().size() < 3) return nullptr;
  const int64_t out_channels = w->weight->shape()[0];
  if (w->zero_point && w->zero_point->numel() != 1 && w->zero_point->numel() != out_channels) return nullptr;  // the kernel reports it
  auto state = std::make_shared<WidenedWeights>();
  state->shape = w->weight->shape();
  state->data.resize(static_cast<size_t>(w->weight->numel()));
  subtract_zero_point(w->weight->view(), w->zero_point_or_null(),
                      w->weight->numel() / std::max<int64_t>(1, out_channels), state->data.data());
  return state;
}

/// X' and W' in int16 (W' from compile time when the weights are constant).
/// x's zero point is per tensor; w's per tensor or per output channel.
struct AdjustedOperands {
  const int16_t* x = nullptr;
  const int16_t* w = nullptr;
};

AdjustedOperands adjust_operands(const KernelContext& ctx, const IntegerConvShape& s, const TensorView& x,
                                 const TensorView* x_zero_point, const TensorView& w, const TensorView* w_zero_point) {
  if (x_zero_point && x_zero_point->numel() != 1) ctx.fail("x_zero_point must be a single value, has ", x_zero_point->numel());
  check_channel_count(ctx, w_zero_point, s.out_channels, "w_zero_point");
  AdjustedOperands adjusted;
  int16_t* x16 = scratch<int16_t>(ScratchSlot::kA, x.numel());
  subtract_zero_point(x, x_zero_point, 1, x16);
  adjusted.x = x16;
  const WidenedWeights* prepared = ctx.state<WidenedWeights>();
  if (prepared && prepared->shape == w.shape) {
    adjusted.w = prepared->data.data();
  } else {
    int16_t* w16 = scratch<int16_t>(ScratchSlot::kB, w.numel());
    subtract_zero_point(w, w_zero_point, s.depth(), w16);
    adjusted.w = w16;
  }
  return adjusted;
}

void conv_integer_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& w = ctx.input(1);
  const IntegerConvShape s = integer_conv_shape(ctx, x.shape, w.shape);
  const AdjustedOperands adjusted =
      adjust_operands(ctx, s, x, ctx.has_input(2) ? &ctx.input(2) : nullptr, w, ctx.has_input(3) ? &ctx.input(3) : nullptr);
  int32_t* y = ctx.output(0).as<int32_t>();
  const int64_t spatial = s.out_size();
  integer_conv(ctx, s, adjusted.x, adjusted.w, [&](int64_t n, int64_t oc0, int64_t rows, const int32_t* acc) {
    std::copy(acc, acc + rows * spatial, y + (n * s.out_channels + oc0) * spatial);
  });
}

// QLinearConv inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
void qlinear_conv_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& w = ctx.input(3);
  const TensorView& x_scale = ctx.input(1);
  const TensorView& w_scale = ctx.input(4);
  const TensorView& y_scale = ctx.input(6);
  const IntegerConvShape s = integer_conv_shape(ctx, x.shape, w.shape);
  const AdjustedOperands adjusted =
      adjust_operands(ctx, s, x, ctx.has_input(2) ? &ctx.input(2) : nullptr, w, ctx.has_input(5) ? &ctx.input(5) : nullptr);
  if (x_scale.numel() != 1) ctx.fail("x_scale must be a single value, has ", x_scale.numel());
  if (y_scale.numel() != 1) ctx.fail("y_scale must be a single value, has ", y_scale.numel());
  check_channel_count(ctx, &w_scale, s.out_channels, "w_scale");
  const TensorView* bias = ctx.has_input(8) ? &ctx.input(8) : nullptr;
  if (bias && bias->numel() != s.out_channels) ctx.fail("B has ", bias->numel(), " values, expected ", s.out_channels);
  // float32 x_scale * w_scale / y_scale per output channel, as the reference computes it.
  std::vector<float> multiplier(static_cast<size_t>(s.out_channels));
  for (int64_t oc = 0; oc < s.out_channels; ++oc) {
    multiplier[static_cast<size_t>(oc)] = x_scale.as<float>()[0] * w_scale.as<float>()[w_scale.numel() == 1 ? 0 : oc] / y_scale.as<float>()[0];
  }
  const int32_t y_zero_point = scalar_zero_point(ctx.has_input(7) ? &ctx.input(7) : nullptr);
  const int32_t* b = bias ? bias->as<int32_t>() : nullptr;
  const int64_t spatial = s.out_size();
  TensorView& y = ctx.output(0);
  auto run = [&](auto q_tag) {
    using Q = decltype(q_tag);
    Q* out = y.as<Q>();
    integer_conv(ctx, s, adjusted.x, adjusted.w, [&](int64_t n, int64_t oc0, int64_t rows, const int32_t* acc) {
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t oc = oc0 + r;
        const int32_t bv = b ? b[oc] : 0;
        const double m = multiplier[static_cast<size_t>(oc)];
        Q* yrow = out + (n * s.out_channels + oc) * spatial;
        const int32_t* arow = acc + r * spatial;
        for (int64_t j = 0; j < spatial; ++j) yrow[j] = requantize<Q>(arow[j] + bv, m, y_zero_point);
      }
    });
  };
  if (y.dtype == DType::kUInt8) return run(uint8_t{});
  if (y.dtype == DType::kInt8) return run(int8_t{});
  throw_unsupported(ctx.node().describe(), ": output dtype ", dtype_name(y.dtype), " (int8 and uint8 are supported)");
}

}  // namespace

void register_quantization_conv_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "ConvInteger", .run = conv_integer_kernel, .prepare = prepare_weights<1, 3>});
  registry.add({.op_type = "QLinearConv", .run = qlinear_conv_kernel, .prepare = prepare_weights<3, 5>});
}

}  // namespace tessera::native
