// Native kernels of layout ops: Transpose, Concat, Split, Slice, Tile, Pad,
// DepthToSpace, SpaceToDepth, Trilu, CumSum, ReverseSequence.
#include <algorithm>
#include <cstring>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/integer_arithmetic.h"
#include "backends/native/kernels/tensor_internal.h"
#include "ir/ops/tensor_internal.h"
#include "ir/shape_util.h"

namespace tessera::native {
namespace {

void transpose_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  transpose(ctx.pool(), in, transpose_perm(ctx.node(), in.rank()), ctx.output(0));
}

int64_t concat_axis(const KernelContext& ctx, int64_t rank) {
  return normalize_axis(ctx.attrs().get_int_or("axis", 1), rank);
}

/// True when `a` and `b` are the same elements of the same memory.
bool same_place(const TensorView& a, const TensorView& b) {
  if (a.data != b.data || a.shape != b.shape) return false;
  const std::vector<int64_t> sa = view_strides(a);
  const std::vector<int64_t> sb = view_strides(b);
  for (size_t d = 0; d < a.shape.size(); ++d) {
    if (a.shape[d] > 1 && sa[d] != sb[d]) return false;
  }
  return true;
}

/// Concat with a strided output or input (a caller's buffer: native::reads_strided_input, writes_into): each input
/// copied into its box of the output, except one that already sits there. A key/value cache bound as the same
/// memory for the past input and the present output thus costs only the new positions a step.
void concat_strided(const KernelContext& ctx, const TensorView& out, size_t axis) {
  const std::vector<int64_t> strides = view_strides(out);
  const int64_t item = static_cast<int64_t>(dtype_size(out.dtype));
  int64_t begin = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorView& in = ctx.input(i);
    TensorView box = out;
    box.shape[axis] = in.shape[axis];
    box.strides = strides;
    box.data = static_cast<char*>(out.data) + begin * strides[axis] * item;
    begin += in.shape[axis];
    if (in.numel() == 0 || same_place(box, in)) continue;
    copy_strided(box, in);
  }
}

void concat_kernel(KernelContext& ctx) {
  const TensorView& out = ctx.output(0);
  const size_t axis = static_cast<size_t>(concat_axis(ctx, out.rank()));
  bool strided = out.strided();
  for (size_t i = 0; i < ctx.num_inputs(); ++i) strided |= ctx.input(i).strided();
  if (strided) return concat_strided(ctx, out, axis);
  const int64_t outer = shape_product(out.shape, 0, axis);
  const int64_t out_row = shape_product(out.shape, axis, out.shape.size()) * static_cast<int64_t>(dtype_size(out.dtype));
  int64_t column = 0;  // byte offset of the current input within an output row
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorView& in = ctx.input(i);
    const int64_t in_row = outer == 0 ? 0 : static_cast<int64_t>(in.nbytes()) / outer;
    const auto* src = static_cast<const uint8_t*>(in.data);
    auto* dst = static_cast<uint8_t*>(out.data) + column;
    if (in_row > 0) {
      ctx.pool().parallel_for(outer, std::max<int64_t>(1, (1 << 17) / in_row), [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) std::memcpy(dst + o * out_row, src + o * in_row, static_cast<size_t>(in_row));
      });
    }
    column += in_row;
  }
}

void split_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.attrs().get_int_or("axis", 0), in.rank()));
  const int64_t outer = shape_product(in.shape, 0, axis);
  const int64_t inner = shape_product(in.shape, axis + 1, in.shape.size()) * static_cast<int64_t>(dtype_size(in.dtype));
  const int64_t in_row = in.shape[axis] * inner;
  int64_t column = 0;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    // Every output has a shape from inference even when the model omits it.
    int64_t size;
    if (ctx.has_output(i)) {
      size = ctx.output(i).shape[axis];
    } else {
      std::optional<std::vector<int64_t>> split;
      if (ctx.has_input(1)) split = read_ints(ctx.input(1));
      size = resolve_split(ctx.node(), in.shape[axis], ctx.num_outputs(), split)[i];
    }
    const int64_t out_row = size * inner;
    if (ctx.has_output(i) && out_row > 0) {
      const auto* src = static_cast<const uint8_t*>(in.data) + column;
      auto* dst = static_cast<uint8_t*>(ctx.output(i).data);
      ctx.pool().parallel_for(outer, std::max<int64_t>(1, (1 << 17) / out_row), [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) std::memcpy(dst + o * out_row, src + o * in_row, static_cast<size_t>(out_row));
      });
    }
    column += out_row;
  }
}

void slice_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  std::optional<std::vector<int64_t>> axes, steps;
  if (ctx.has_input(3)) axes = read_ints(ctx.input(3));
  if (ctx.has_input(4)) steps = read_ints(ctx.input(4));
  SliceSpec spec = resolve_slice(ctx.node(), in.shape, read_ints(ctx.input(1)), read_ints(ctx.input(2)), axes, steps);
  std::vector<int64_t> strides = strides_of(in.shape);
  int64_t offset = 0;
  for (size_t a = 0; a < strides.size(); ++a) {
    offset += spec.starts[a] * strides[a];
    strides[a] *= spec.steps[a];
  }
  const TensorView& out = ctx.output(0);
  strided_copy(ctx.pool(), dtype_size(in.dtype), in.data, offset, strides, out.data, out.shape);
}

void tile_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  if (out.numel() == 0) return;
  // Output index (r, i) per axis reads input index i: shape [r0, d0, r1, d1...].
  std::vector<int64_t> in_strides = strides_of(in.shape);
  Shape shape;
  std::vector<int64_t> strides;
  for (size_t a = 0; a < in.shape.size(); ++a) {
    shape.push_back(out.shape[a] / in.shape[a]);
    strides.push_back(0);
    shape.push_back(in.shape[a]);
    strides.push_back(in_strides[a]);
  }
  strided_copy(ctx.pool(), dtype_size(in.dtype), in.data, 0, strides, out.data, shape);
}

/// For one axis, which input index each output index reads (-1: the pad value).
std::vector<int64_t> pad_axis_map(int64_t out_dim, int64_t in_dim, int64_t begin, const std::string& mode) {
  std::vector<int64_t> map(static_cast<size_t>(out_dim));
  for (int64_t o = 0; o < out_dim; ++o) {
    int64_t i = o - begin;
    if (i < 0 || i >= in_dim) {
      if (mode == "constant") {
        i = -1;
      } else if (mode == "edge") {
        i = std::clamp<int64_t>(i, 0, in_dim - 1);
      } else if (in_dim == 1) {  // reflect
        i = 0;
      } else {
        const int64_t period = 2 * (in_dim - 1);
        i = ((i % period) + period) % period;
        if (i >= in_dim) i = period - i;
      }
    }
    map[static_cast<size_t>(o)] = i;
  }
  return map;
}

void pad_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  const std::string mode = ctx.attrs().get_string_or("mode", "constant");
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(3)) axes = read_ints(ctx.input(3));
  const std::vector<int64_t> pads = resolve_pads(ctx.node(), in.rank(), read_ints(ctx.input(1)), axes);
  uint8_t value[8] = {};
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
    std::memcpy(value, ctx.input(2).data, dtype_size(in.dtype));
  } else {
    store_scalar(in.dtype, ctx.attrs().get_float_or("value", 0.0f), value);
  }
  if (out.numel() == 0) return;
  if (in.rank() == 0) return copy_bytes(in, out);
  const size_t rank = in.shape.size();
  std::vector<std::vector<int64_t>> maps(rank);
  for (size_t a = 0; a < rank; ++a) maps[a] = pad_axis_map(out.shape[a], in.shape[a], pads[a], mode);
  const std::vector<int64_t> in_strides = strides_of(in.shape);
  const int64_t n = out.shape.back();
  const int64_t rows = out.numel() / n;
  const std::vector<int64_t>& last = maps.back();
  dispatch_by_size(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    T pad_value;
    std::memcpy(&pad_value, value, sizeof(T));
    const T* src = in.as<T>();
    T* dst = out.as<T>();
    ctx.pool().parallel_for(rows, std::max<int64_t>(1, (1 << 14) / n), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        T* y = dst + row * n;
        int64_t offset = 0;
        bool padded = false;
        for (int64_t r = row, a = static_cast<int64_t>(rank) - 2; a >= 0; --a) {
          const int64_t i = maps[static_cast<size_t>(a)][static_cast<size_t>(r % out.shape[static_cast<size_t>(a)])];
          r /= out.shape[static_cast<size_t>(a)];
          if (i < 0) padded = true;
          offset += i * in_strides[static_cast<size_t>(a)];
        }
        if (padded) {
          std::fill(y, y + n, pad_value);
          continue;
        }
        const T* x = src + offset;
        for (int64_t j = 0; j < n; ++j) {
          const int64_t i = last[static_cast<size_t>(j)];
          y[j] = i < 0 ? pad_value : x[i];
        }
      }
    });
  });
}

void depth_to_space_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  const int64_t b = ctx.attrs().get_int("blocksize");
  const int64_t n = in.shape[0], c = in.shape[1], h = in.shape[2], w = in.shape[3];
  const int64_t oc = c / (b * b), hw = h * w;
  // Output viewed as [N, C/b², H, b, W, b]; the strides say where each reads.
  std::vector<int64_t> strides;
  if (ctx.attrs().get_string_or("mode", "DCR") == "DCR") {  // input channels as [b, b, C/b²]
    strides = {c * hw, hw, w, b * oc * hw, 1, oc * hw};
  } else {  // CRD: input channels as [C/b², b, b]
    strides = {c * hw, b * b * hw, w, b * hw, 1, hw};
  }
  strided_copy(ctx.pool(), dtype_size(in.dtype), in.data, 0, strides, out.data, {n, oc, h, b, w, b});
}

void space_to_depth_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  const int64_t b = ctx.attrs().get_int("blocksize");
  const int64_t n = in.shape[0], c = in.shape[1], h = in.shape[2], w = in.shape[3];
  // Output viewed as [N, b, b, C, H/b, W/b], reading input [N, C, H/b, b, W/b, b].
  strided_copy(ctx.pool(), dtype_size(in.dtype), in.data, 0, {c * h * w, w, 1, h * w, b * w, b}, out.data,
               {n, b, b, c, h / b, w / b});
}

void trilu_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  if (ctx.has_input(1) && ctx.input(1).numel() != 1) ctx.fail("k must hold one value, it has ", ctx.input(1).numel());
  const int64_t k = ctx.has_input(1) ? view_int_at(ctx.input(1), 0) : 0;
  const bool upper = ctx.attrs().get_int_or("upper", 1) != 0;
  const int64_t rows = in.shape[in.shape.size() - 2], cols = in.shape.back();
  const int64_t matrices = rows * cols == 0 ? 0 : in.numel() / (rows * cols);
  dispatch_by_size(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = in.as<T>();
    T* y = out.as<T>();
    for (int64_t m = 0; m < matrices; ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t base = (m * rows + i) * cols;
        for (int64_t j = 0; j < cols; ++j) {
          const bool keep = upper ? j - i >= k : j - i <= k;
          y[base + j] = keep ? x[base + j] : T{};
        }
      }
    }
  });
}

void cum_sum_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  if (ctx.input(1).numel() != 1) ctx.fail("axis must be a scalar");
  const int64_t raw_axis = view_int_at(ctx.input(1), 0);
  if (raw_axis < -in.rank() || raw_axis >= in.rank()) ctx.fail("axis ", raw_axis, " is out of range for rank ", in.rank());
  const size_t axis = static_cast<size_t>(raw_axis < 0 ? raw_axis + in.rank() : raw_axis);
  const bool exclusive = ctx.attrs().get_int_or("exclusive", 0) != 0;
  const bool reverse = ctx.attrs().get_int_or("reverse", 0) != 0;
  const int64_t outer = shape_product(in.shape, 0, axis), dim = in.shape[axis];
  const int64_t inner = shape_product(in.shape, axis + 1, in.shape.size());
  dispatch_numeric(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = in.as<T>();
    T* y = out.as<T>();
    std::vector<T> sum(static_cast<size_t>(inner));
    for (int64_t o = 0; o < outer; ++o) {
      std::fill(sum.begin(), sum.end(), T{});
      for (int64_t step = 0; step < dim; ++step) {
        const int64_t d = reverse ? dim - 1 - step : step;
        const int64_t base = (o * dim + d) * inner;
        for (int64_t i = 0; i < inner; ++i) {
          const T v = x[base + i];
          T& running = sum[static_cast<size_t>(i)];
          if (exclusive) {
            y[base + i] = running;
            running = add_wrapping(running, v);
          } else {
            running = add_wrapping(running, v);
            y[base + i] = running;
          }
        }
      }
    }
  });
}

void reverse_sequence_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  const size_t batch_axis = static_cast<size_t>(ctx.attrs().get_int_or("batch_axis", 1));
  const size_t time_axis = static_cast<size_t>(ctx.attrs().get_int_or("time_axis", 0));
  const std::vector<int64_t> lengths = read_ints(ctx.input(1));
  const int64_t batch = in.shape[batch_axis], time = in.shape[time_axis];
  if (static_cast<int64_t>(lengths.size()) != batch) {
    ctx.fail("sequence_lens has ", lengths.size(), " values for a batch of ", batch);
  }
  const std::vector<int64_t> strides = strides_of(in.shape);
  const int64_t block = shape_product(in.shape, 2, in.shape.size()) * static_cast<int64_t>(dtype_size(in.dtype));
  const auto* src = static_cast<const uint8_t*>(in.data);
  auto* dst = static_cast<uint8_t*>(out.data);
  const int64_t es = static_cast<int64_t>(dtype_size(in.dtype));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lengths[static_cast<size_t>(b)];
    if (len < 0 || len > time) ctx.fail("sequence length ", len, " of batch ", b, " is outside [0, ", time, "]");
    for (int64_t t = 0; t < time; ++t) {
      const int64_t from = t < len ? len - 1 - t : t;
      const int64_t dst_offset = (b * strides[batch_axis] + t * strides[time_axis]) * es;
      const int64_t src_offset = (b * strides[batch_axis] + from * strides[time_axis]) * es;
      std::memcpy(dst + dst_offset, src + src_offset, static_cast<size_t>(block));
    }
  }
}

}  // namespace

void register_tensor_layout_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "Transpose", .run = transpose_kernel});
  registry.add({.op_type = "Concat", .run = concat_kernel});
  registry.add({.op_type = "Split", .run = split_kernel});
  registry.add({.op_type = "Slice", .run = slice_kernel});
  registry.add({.op_type = "Tile", .run = tile_kernel});
  registry.add({.op_type = "Pad", .run = pad_kernel});
  registry.add({.op_type = "DepthToSpace", .run = depth_to_space_kernel});
  registry.add({.op_type = "SpaceToDepth", .run = space_to_depth_kernel});
  registry.add({.op_type = "Trilu", .run = trilu_kernel});
  registry.add({.op_type = "CumSum", .run = cum_sum_kernel});
  registry.add({.op_type = "ReverseSequence", .run = reverse_sequence_kernel});
}

}  // namespace tessera::native
