// Native ConvInteger and QLinearConv: per (image, group),
// Y[g] (Cout/g x spatial) = W'[g] (Cout/g x Cin/g*kernel) * im2col(X'[g]) on
// the integer GEMM, where X' and W' are the zero-point-adjusted operands: in
// tasks of output pixels whose im2col columns are built, packed and multiplied
// in cache (on vpdpbusd where the CPU has AVX512_VNNI, else in int16), or a
// task per (image, group) for thin groups. Padding reads as the zero point, as
// in ONNX's reference. Geometry comes from window_geometry, shared with Conv.
#include <algorithm>
#include <optional>

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

/// A run of output pixels within one output row: what each row of a tile's
/// im2col matrix reads from one row of X.
struct PixelRun {
  int64_t od = 0, oh = 0, ow = 0, length = 0, start = 0;  // start: the index of its first pixel
};

/// The runs of output pixels [j0, j0 + count), in order (into `runs`, which
/// has room for count + 1).
int64_t pixel_runs(const IntegerConvShape& s, int64_t j0, int64_t count, PixelRun* runs) {
  const int64_t width = s.out[2], plane = s.out[1] * s.out[2], end = j0 + count;
  int64_t n = 0;
  for (int64_t j = j0; j < end; ++n) {
    runs[n] = {j / plane, (j % plane) / width, j % width, 0, j};
    runs[n].length = std::min(width - runs[n].ow, end - j);
    j += runs[n].length;
  }
  return n;
}

/// For each kernel column kw, the output columns [lo, hi) whose tap
/// ow * stride + kw * dilation - pad falls inside X's row (2 values a kw).
std::vector<int64_t> column_bounds(const IntegerConvShape& s) {
  std::vector<int64_t> bounds(static_cast<size_t>(2 * s.kernel[2]));
  const int64_t width = s.out[2], sw = s.stride[2];
  for (int64_t kw = 0; kw < s.kernel[2]; ++kw) {
    const int64_t w_offset = kw * s.dilation[2] - s.pad[2];
    const int64_t lo = std::min(width, w_offset >= 0 ? 0 : (-w_offset + sw - 1) / sw);
    bounds[static_cast<size_t>(2 * kw)] = lo;
    bounds[static_cast<size_t>(2 * kw + 1)] =
        std::max(lo, std::min(width, s.in[2] - w_offset <= 0 ? 0 : (s.in[2] - w_offset + sw - 1) / sw));
  }
  return bounds;
}

/// The columns [j0, j0 + count) of the im2col matrix (depth x out_size) of
/// one image's group, as a depth x count matrix (`runs`: pixel_runs of that
/// range; `bounds`: column_bounds): each tap read from x (the group's first
/// channel) through `convert`, out-of-range taps `pad`.
template <typename T, typename S, typename Convert>
void im2col_tile(const IntegerConvShape& s, const int64_t* bounds, const S* x, const PixelRun* runs, int64_t run_count,
                 int64_t count, T pad, Convert convert, T* col) {
  // Flat: consecutive output pixels read consecutive elements of X (stride 1
  // within and across rows: rows as wide as X's, as many rows as X's).
  const bool flat = s.stride[2] == 1 && s.stride[1] == 1 && s.in[2] == s.out[2] && s.in[1] == s.out[1] &&
                    (s.stride[0] == 1 || s.out[0] == 1);
  int64_t row = 0;
  for (int64_t c = 0; c < s.in_per_group(); ++c) {
    const S* xc = x + c * s.in_size();
    for (int64_t kd = 0; kd < s.kernel[0]; ++kd) {
      for (int64_t kh = 0; kh < s.kernel[1]; ++kh) {
        for (int64_t kw = 0; kw < s.kernel[2]; ++kw, ++row) {
          T* dst = col + row * count;
          const int64_t w_offset = kw * s.dilation[2] - s.pad[2];
          const int64_t sw = s.stride[2], lo = bounds[2 * kw], hi = bounds[2 * kw + 1];
          if (flat) {
            // Every pixel's tap is x[base + j]: one long copy, then the taps outside X's rows padded.
            const int64_t first = (kd * s.dilation[0] - s.pad[0]) * s.in[1] * s.in[2] +
                                  (kh * s.dilation[1] - s.pad[1]) * s.in[2] + w_offset + runs[0].start;
            const int64_t t0 = std::clamp<int64_t>(-first, 0, count), t1 = std::clamp<int64_t>(s.in_size() - first, t0, count);
            std::fill(dst, dst + t0, pad);
            for (int64_t t = t0; t < t1; ++t) dst[t] = convert(xc[first + t]);
            std::fill(dst + t1, dst + count, pad);
            for (int64_t r = 0; r < run_count; ++r) {
              const PixelRun& run = runs[r];
              const int64_t id = run.od * s.stride[0] - s.pad[0] + kd * s.dilation[0];
              const int64_t ih = run.oh - s.pad[1] + kh * s.dilation[1];
              T* out = dst - run.ow;
              if (id < 0 || id >= s.in[0] || ih < 0 || ih >= s.in[1]) {
                std::fill(out + run.ow, out + run.ow + run.length, pad);
              } else {
                std::fill(out + run.ow, out + std::max(run.ow, std::min(lo, run.ow + run.length)), pad);
                std::fill(out + std::min(run.ow + run.length, std::max(hi, run.ow)), out + run.ow + run.length, pad);
              }
              dst += run.length;
            }
            continue;
          }
          for (int64_t r = 0; r < run_count; ++r) {
            const PixelRun& run = runs[r];
            const int64_t id = run.od * s.stride[0] - s.pad[0] + kd * s.dilation[0];
            const int64_t ih = run.oh * s.stride[1] - s.pad[1] + kh * s.dilation[1];
            if (id < 0 || id >= s.in[0] || ih < 0 || ih >= s.in[1]) {
              std::fill(dst, dst + run.length, pad);
            } else {
              const S* xrow = xc + (id * s.in[1] + ih) * s.in[2] + w_offset;
              const int64_t a = std::clamp(lo, run.ow, run.ow + run.length), b = std::clamp(hi, run.ow, run.ow + run.length);
              T* out = dst - run.ow;  // out[ow] is this run's pixel ow
              std::fill(out + run.ow, out + a, pad);
              if (sw == 1) {
                for (int64_t o = a; o < b; ++o) out[o] = convert(xrow[o]);
              } else {
                for (int64_t o = a; o < b; ++o) out[o] = convert(xrow[o * sw]);
              }
              std::fill(out + b, out + run.ow + run.length, pad);
            }
            dst += run.length;
          }
        }
      }
    }
  }
}

/// The weights as the GEMMs read them (from compile time when constant):
/// `widened` W - zw in int16 (out_channels x depth); where this CPU has the
/// u8 x s8 GEMM, `quad` W as its A (shifted to uint8, rows of depth bytes,
/// with each output channel's zero point and term).
struct ConvWeights {
  const int16_t* widened = nullptr;
  const QuadA* quad = nullptr;
};

/// What the pixel tiles read of X: the raw 8-bit tensor and its zero point.
struct ConvInput {
  const uint8_t* bytes = nullptr;
  bool is_signed = false;
  int32_t zero_point = 0;
};

/// im2col_tile for the int16 GEMM: each tap X - zx, out-of-range taps 0. `x`
/// points at the group's first channel of the raw 8-bit tensor.
void im2col_int16(const IntegerConvShape& s, const int64_t* bounds, const ConvInput& x, const uint8_t* xg,
                  const PixelRun* runs, int64_t run_count, int64_t count, int16_t* col) {
  const int32_t z = x.zero_point;
  if (x.is_signed) {
    im2col_tile<int16_t>(s, bounds, reinterpret_cast<const int8_t*>(xg), runs, run_count, count, int16_t{0},
                         [z](int8_t v) { return static_cast<int16_t>(v - z); }, col);
  } else {
    im2col_tile<int16_t>(s, bounds, xg, runs, run_count, count, int16_t{0},
                         [z](uint8_t v) { return static_cast<int16_t>(v - z); }, col);
  }
}

/// Pixels a tile of the tiled path: its im2col matrix (depth x tile) near 64K
/// values (64 KiB on the u8 x s8 GEMM, 128 KiB in int16: L2-resident; measured
/// faster than half or twice that on both), in whole 32-column microkernel
/// tiles, 32 to 256.
int64_t pixel_tile(int64_t depth) {
  const int64_t fit = (65536 / std::max<int64_t>(1, depth)) / 32 * 32;
  return std::clamp<int64_t>(fit, 32, 256);
}

/// The tiled path: tasks are (image, group, tile of output pixels); each
/// builds its tile's im2col matrix straight from X, packs it as the GEMM's B
/// and multiplies every output channel of the group by it, all in the task's
/// cache, so nothing runs serially and no full-size matrix is written.
/// finish(n, oc0, rows, j0, count, acc, ld) takes rows x count accumulators.
template <typename Finish>
void tiled_integer_conv(const KernelContext& ctx, const IntegerConvShape& s, const ConvInput& x, const ConvWeights& w,
                        Finish&& finish) {
  const int64_t depth = s.depth(), spatial = s.out_size(), rows = s.out_per_group();
  const bool quad = w.quad != nullptr;
  const int64_t tile = pixel_tile(depth);
  const int64_t tiles = (spatial + tile - 1) / tile, pairs = s.batch * s.group;
  const int64_t group_stride = s.in_per_group() * s.in_size();
  const IntegerGemmTilesFn gemm_tiles = quad ? nullptr : integer_gemm_tiles_for_cpu();
  const std::vector<int64_t> bounds = column_bounds(s);
  ctx.pool().parallel_for(pairs * tiles, 1, [&](int64_t begin, int64_t end) {
    int32_t* acc = scratch<int32_t>(ScratchSlot::kTaskAccumulators, rows * tile);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t p = task / tiles, j0 = (task % tiles) * tile, count = std::min(tile, spatial - j0);
      const int64_t n = p / s.group, g = p % s.group;
      const uint8_t* xg = x.bytes + n * s.in_channels * s.in_size() + g * group_stride;
      PixelRun runs[257];
      const int64_t run_count = pixel_runs(s, j0, count, runs);
      if (quad) {
        // B = X as int8 (uint8 shifted by -128: x ^ 0x80), padding the shifted zero point.
        const uint8_t flip = x.is_signed ? 0x00 : 0x80;
        auto* col = scratch<int8_t>(ScratchSlot::kTaskColumns, depth * tile);
        im2col_tile<int8_t>(s, bounds.data(), xg, runs, run_count, count, static_cast<int8_t>(static_cast<uint8_t>(x.zero_point) ^ flip),
                            [flip](uint8_t v) { return static_cast<int8_t>(v ^ flip); }, col);
        auto* packed = scratch<int8_t>(ScratchSlot::kTaskPacked, (tile / kQuadGemmPanel + 1) * quad_panel_stride(depth));
        int32_t column_sums[256] = {}, column_zero_points[256];
        pack_quad_panels(depth, count, col, count, packed, column_sums);
        std::fill(column_zero_points, column_zero_points + count, x.zero_point - (x.is_signed ? 0 : 128));
        QuadTileArgs t;
        t.k = depth;
        t.a = w.quad->data + g * rows * depth;
        t.lda = depth;
        t.row_zero_points = w.quad->row_zero_points.data() + g * rows;
        t.row_terms = w.quad->row_terms.data() + g * rows;
        t.packed_b = packed;
        t.panel_stride = quad_panel_stride(depth);
        t.column_sums = column_sums;
        t.column_zero_points = column_zero_points;
        t.c = acc;
        t.ldc = count;
        quad_gemm_tiles_avx512vnni(t, 0, rows, 0, count);
      } else {
        auto* col = scratch<int16_t>(ScratchSlot::kTaskColumns, depth * tile);
        im2col_int16(s, bounds.data(), x, xg, runs, run_count, count, col);
        auto* packed = scratch<int16_t>(ScratchSlot::kTaskPacked, packed_integer_b_size(depth, count));
        pack_integer_b(depth, count, col, count, packed);
        gemm_tiles(rows, count, depth, w.widened + g * rows * depth, depth, packed, acc, count);
      }
      finish(n, g * rows, rows, j0, count, acc, count);
    }
  });
}

/// Runs the convolution; calls finish(image, oc0, rows, j0, count, acc, ld)
/// with blocks of rows x count accumulators (output channels oc0 .. oc0+rows,
/// output pixels j0 .. j0+count), in parallel. Groups of fewer than 8 output
/// channels (depthwise) that are many run a task per (image, group) on the
/// int16 GEMM; the others the tiled path.
template <typename Finish>
void integer_conv(const KernelContext& ctx, const IntegerConvShape& s, const ConvInput& x, const ConvWeights& w,
                  Finish&& finish) {
  const int64_t depth = s.depth(), spatial = s.out_size(), rows = s.out_per_group();
  if (!integer_gemm_depth_ok(depth)) ctx.fail("C/group x kernel size ", depth, " is too large for exact int32 accumulation");
  const int64_t pairs = s.batch * s.group;
  if (rows >= 8 || pairs == 1) return tiled_integer_conv(ctx, s, x, w, finish);
  // One task per (image, group), each over all of its output pixels.
  std::vector<PixelRun> runs(static_cast<size_t>(spatial + 1));
  const int64_t run_count = pixel_runs(s, 0, spatial, runs.data());
  const std::vector<int64_t> bounds = column_bounds(s);
  ctx.pool().parallel_for(pairs, 1, [&](int64_t begin, int64_t end) {
    int32_t* acc = scratch<int32_t>(ScratchSlot::kTaskAccumulators, rows * spatial);
    int16_t* col = scratch<int16_t>(ScratchSlot::kTaskColumns, depth * spatial);
    for (int64_t p = begin; p < end; ++p) {
      const int64_t n = p / s.group, g = p % s.group;
      const uint8_t* xg = x.bytes + (n * s.in_channels + g * s.in_per_group()) * s.in_size();
      im2col_int16(s, bounds.data(), x, xg, runs.data(), run_count, spatial, col);
      integer_gemm(rows, spatial, depth, w.widened + g * rows * depth, col, acc, spatial);
      finish(n, g * rows, rows, 0, spatial, acc, spatial);
    }
  });
}

void check_channel_count(const KernelContext& ctx, const TensorView* param, int64_t channels, const char* what) {
  if (param && param->numel() != 1 && param->numel() != channels) {
    ctx.fail(what, " has ", param->numel(), " values, expected 1 or ", channels, " (one per output channel)");
  }
}

/// The weights in both of the GEMMs' forms (ConvWeights): made at compile time
/// for constant weights with a constant (or absent) zero point, else per call.
struct PreparedWeights {
  Shape shape;
  std::vector<int16_t> widened;
  std::vector<uint8_t> quad_bytes;  // the bytes quad.data points at
  std::optional<QuadA> quad;

  ConvWeights weights() const { return {widened.data(), quad ? &*quad : nullptr}; }
};

void prepare_conv_weights(const TensorView& w, const TensorView* zero_point, PreparedWeights& out) {
  const int64_t out_channels = w.shape[0], depth = w.numel() / std::max<int64_t>(1, out_channels);
  out.shape = w.shape;
  out.widened.resize(static_cast<size_t>(w.numel()));
  subtract_zero_point(w, zero_point, depth, out.widened.data());
  if (!quad_gemm_available()) return;
  out.quad.emplace();
  out.quad_bytes.resize(static_cast<size_t>(w.numel()));
  quad_a(w, out_channels, depth, 0, zero_point, out.quad_bytes.data(), *out.quad);
  if (out.quad->data != out.quad_bytes.data()) {  // uint8 weights are read in place: keep a copy
    std::copy(out.quad->data, out.quad->data + w.numel(), out.quad_bytes.begin());
    out.quad->data = out.quad_bytes.data();
  }
}

/// ConvInteger / QLinearConv with constant weights (input kW) and a constant or
/// absent zero point (input kZeroPoint): the weights prepared once (PrepareFn).
template <size_t kW, size_t kZeroPoint>
std::shared_ptr<void> prepare_weights(const Node& node, const std::vector<const Tensor*>& constants,
                                      const std::vector<TensorType>& /*input_types*/) {
  const std::optional<ConstantIntegerWeight> w = constant_integer_weight(node, constants, kW, kZeroPoint);
  if (!w || w->weight->shape().size() < 3) return nullptr;
  const int64_t out_channels = w->weight->shape()[0];
  if (w->zero_point && w->zero_point->numel() != 1 && w->zero_point->numel() != out_channels) return nullptr;  // the kernel reports it
  auto state = std::make_shared<PreparedWeights>();
  prepare_conv_weights(w->weight->view(), w->zero_point_or_null(), *state);
  return state;
}

/// X as the tiles read it and the weights (from compile time when constant;
/// else prepared into `local`). x's zero point is per tensor; w's per tensor
/// or per output channel.
struct ConvOperands {
  ConvInput x;
  ConvWeights w;
};

ConvOperands conv_operands(const KernelContext& ctx, const IntegerConvShape& s, const TensorView& x,
                           const TensorView* x_zero_point, const TensorView& w, const TensorView* w_zero_point,
                           PreparedWeights& local) {
  if (x.dtype != DType::kUInt8 && x.dtype != DType::kInt8) ctx.fail("X has dtype ", dtype_name(x.dtype), " (int8 and uint8 are supported)");
  if (w.dtype != DType::kUInt8 && w.dtype != DType::kInt8) ctx.fail("W has dtype ", dtype_name(w.dtype), " (int8 and uint8 are supported)");
  if (x_zero_point && x_zero_point->numel() != 1) ctx.fail("x_zero_point must be a single value, has ", x_zero_point->numel());
  check_channel_count(ctx, w_zero_point, s.out_channels, "w_zero_point");
  ConvOperands operands;
  operands.x = {static_cast<const uint8_t*>(x.data), x.dtype == DType::kInt8, scalar_zero_point(x_zero_point)};
  const PreparedWeights* prepared = ctx.state<PreparedWeights>();
  if (!prepared || prepared->shape != w.shape) {
    prepare_conv_weights(w, w_zero_point, local);
    prepared = &local;
  }
  operands.w = prepared->weights();
  return operands;
}

void conv_integer_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& w = ctx.input(1);
  const IntegerConvShape s = integer_conv_shape(ctx, x.shape, w.shape);
  PreparedWeights local;
  const ConvOperands operands = conv_operands(ctx, s, x, ctx.has_input(2) ? &ctx.input(2) : nullptr, w,
                                              ctx.has_input(3) ? &ctx.input(3) : nullptr, local);
  int32_t* y = ctx.output(0).as<int32_t>();
  const int64_t spatial = s.out_size();
  integer_conv(ctx, s, operands.x, operands.w,
               [&](int64_t n, int64_t oc0, int64_t rows, int64_t j0, int64_t count, const int32_t* acc, int64_t ld) {
                 for (int64_t r = 0; r < rows; ++r) {
                   std::copy(acc + r * ld, acc + r * ld + count, y + (n * s.out_channels + oc0 + r) * spatial + j0);
                 }
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
  PreparedWeights local;
  const ConvOperands operands = conv_operands(ctx, s, x, ctx.has_input(2) ? &ctx.input(2) : nullptr, w,
                                              ctx.has_input(5) ? &ctx.input(5) : nullptr, local);
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
    integer_conv(ctx, s, operands.x, operands.w,
                 [&](int64_t n, int64_t oc0, int64_t rows, int64_t j0, int64_t count, const int32_t* acc, int64_t ld) {
                   for (int64_t r = 0; r < rows; ++r) {
                     const int64_t oc = oc0 + r;
                     const int32_t bv = b ? b[oc] : 0;
                     const double m = multiplier[static_cast<size_t>(oc)];
                     Q* yrow = out + (n * s.out_channels + oc) * spatial + j0;
                     const int32_t* arow = acc + r * ld;
                     for (int64_t j = 0; j < count; ++j) yrow[j] = requantize<Q>(arow[j] + bv, m, y_zero_point);
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
