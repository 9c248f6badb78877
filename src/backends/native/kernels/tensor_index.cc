// Native kernels of index ops: Gather, GatherElements, GatherND, Scatter,
// ScatterElements, ScatterND, OneHot, NonZero, Compress. Unique lives in
// tensor_unique.cc. Indices are read once, wrapped and range-checked.
#include <algorithm>
#include <cstring>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/tensor_internal.h"
#include "ir/shape_util.h"

namespace tessera::native {
namespace {

void gather_kernel(KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  const TensorView& out = ctx.output(0);
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.attrs().get_int_or("axis", 0), data.rank()));
  const std::vector<int64_t> indices = read_indices(ctx, ctx.input(1), data.shape[axis]);
  const int64_t outer = shape_product(data.shape, 0, axis);
  const int64_t inner = shape_product(data.shape, axis + 1, data.shape.size());
  const int64_t dim = data.shape[axis];
  const int64_t count = static_cast<int64_t>(indices.size());
  dispatch_by_size(data.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = data.as<T>();
    T* y = out.as<T>();
    ctx.pool().parallel_for(outer * count, std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(inner, 1)),
                            [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t o = task / count;
        const T* from = x + (o * dim + indices[static_cast<size_t>(task % count)]) * inner;
        std::copy(from, from + inner, y + task * inner);
      }
    });
  });
}

/// Calls fn(i, target) for every element i of the index tensor `idx` (row-major), `target` being the
/// offset in a tensor of `data_shape` of the element it addresses: the index's value on `axis` (checked
/// against the axis's size, negatives counted from its end), its own position on the other axes. Offsets
/// are worked out row by row as it goes: materialising them (and the values) took two 8-byte arrays as
/// large as the indices, 200 MB for the 12.5M-element scatter of a detection model's RoI pooling.
template <typename Fn>
void for_each_element_target(const KernelContext& ctx, const TensorView& idx, const Shape& data_shape, size_t axis, Fn&& fn) {
  const size_t rank = idx.shape.size();
  const int64_t total = idx.numel();
  if (rank == 0) ctx.fail("indices must have rank >= 1");
  if (total == 0) return;
  const std::vector<int64_t> strides = strides_of(data_shape);
  const int64_t dim = data_shape[axis];
  const int64_t inner = idx.shape[rank - 1];
  const int64_t axis_stride = strides[axis];
  const int64_t last_stride = rank - 1 == axis ? 0 : strides[rank - 1];
  auto run = [&](const auto* p) {
    std::vector<int64_t> pos(rank, 0);
    int64_t base = 0;  // offset of the row's first element, without the axis term
    for (int64_t row = 0; row < total; row += inner) {
      for (int64_t j = 0; j < inner; ++j) {
        int64_t v = static_cast<int64_t>(p[row + j]);
        if (v < -dim || v >= dim) {
          ctx.fail("index ", v, " (at position ", row + j, " of the indices) is out of range for an axis of size ", dim);
        }
        if (v < 0) v += dim;
        fn(row + j, base + j * last_stride + v * axis_stride);
      }
      for (size_t d = rank - 1; d-- > 0;) {
        const int64_t stride = d == axis ? 0 : strides[d];
        base += stride;
        if (++pos[d] < idx.shape[d]) break;
        base -= stride * idx.shape[d];
        pos[d] = 0;
      }
    }
  };
  if (idx.dtype == DType::kInt64) run(idx.as<int64_t>());
  else if (idx.dtype == DType::kInt32) run(idx.as<int32_t>());
  else ctx.fail("indices have dtype ", dtype_name(idx.dtype), ", expected int32 or int64");
}

void check_index_shape(const KernelContext& ctx, const Shape& index_shape, const Shape& data_shape, size_t axis,
                       const char* what) {
  if (index_shape.size() != data_shape.size()) ctx.fail(what, " rank ", index_shape.size(), " differs from data rank ", data_shape.size());
  for (size_t d = 0; d < index_shape.size(); ++d) {
    if (d != axis && index_shape[d] > data_shape[d]) {
      ctx.fail(what, " shape ", shape_to_string(index_shape), " exceeds data shape ", shape_to_string(data_shape), " on axis ", d);
    }
  }
}

void gather_elements_kernel(KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.attrs().get_int_or("axis", 0), data.rank()));
  check_index_shape(ctx, idx.shape, data.shape, axis, "indices");
  dispatch_by_size(data.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* x = data.as<T>();
    T* y = ctx.output(0).as<T>();
    for_each_element_target(ctx, idx, data.shape, axis, [&](int64_t i, int64_t target) { y[i] = x[target]; });
  });
}

/// Offsets into data of the slices GatherND/ScatterND address: indices of
/// shape [batch..., tuples..., k] over data [batch..., k dims, slice...].
std::vector<int64_t> nd_offsets(const KernelContext& ctx, const TensorView& data, const TensorView& indices,
                                int64_t batch_dims, int64_t* slice_size) {
  const int64_t k = indices.shape.back();
  const size_t b = static_cast<size_t>(batch_dims);
  if (k < 1 || k > data.rank() - batch_dims) ctx.fail("indices' last dim ", k, " must be in [1, ", data.rank() - batch_dims, "]");
  for (size_t d = 0; d < b; ++d) {
    if (indices.shape[d] != data.shape[d]) ctx.fail("batch dim ", d, " of indices is ", indices.shape[d], ", of data ", data.shape[d]);
  }
  const std::vector<int64_t> strides = strides_of(data.shape);
  *slice_size = shape_product(data.shape, b + static_cast<size_t>(k), data.shape.size());
  const int64_t batch_stride = shape_product(data.shape, b, data.shape.size());
  const int64_t tuples = indices.numel() / k;
  const int64_t tuples_per_batch = std::max<int64_t>(1, tuples / std::max<int64_t>(1, shape_product(data.shape, 0, b)));
  const std::vector<int64_t> raw = read_ints(indices);
  std::vector<int64_t> offsets(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = (t / tuples_per_batch) * batch_stride;
    for (int64_t j = 0; j < k; ++j) {
      const size_t axis = b + static_cast<size_t>(j);
      int64_t v = raw[static_cast<size_t>(t * k + j)];
      const int64_t dim = data.shape[axis];
      if (v < -dim || v >= dim) ctx.fail("index ", v, " is out of range for axis ", axis, " of size ", dim);
      if (v < 0) v += dim;
      offset += v * strides[axis];
    }
    offsets[static_cast<size_t>(t)] = offset;
  }
  return offsets;
}

void gather_nd_kernel(KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  int64_t slice = 0;
  const std::vector<int64_t> offsets = nd_offsets(ctx, data, ctx.input(1), ctx.attrs().get_int_or("batch_dims", 0), &slice);
  const size_t bytes = static_cast<size_t>(slice) * dtype_size(data.dtype);
  const auto* x = static_cast<const uint8_t*>(data.data);
  auto* y = static_cast<uint8_t*>(ctx.output(0).data);
  for (size_t t = 0; t < offsets.size(); ++t) {
    std::memcpy(y + t * bytes, x + offsets[t] * static_cast<int64_t>(dtype_size(data.dtype)), bytes);
  }
}

/// Calls apply(out_element, update_element) for every scatter target.
template <typename Apply>
void for_each_reduction(const KernelContext& ctx, DType dtype, const std::string& reduction, Apply&& apply) {
  if (reduction == "none") {
    dispatch_by_size(dtype, [&](auto tag) {
      using T = decltype(tag);
      apply(tag, [](T& y, T u) { y = u; });
    });
    return;
  }
  dispatch_numeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (reduction == "add") apply(tag, [](T& y, T u) { y = static_cast<T>(y + u); });
    else if (reduction == "mul") apply(tag, [](T& y, T u) { y = static_cast<T>(y * u); });
    else if (reduction == "max") apply(tag, [](T& y, T u) { y = std::max(y, u); });
    else if (reduction == "min") apply(tag, [](T& y, T u) { y = std::min(y, u); });
    else ctx.fail("unknown reduction '", reduction, "'");
  });
}

void scatter_elements_kernel(KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const TensorView& updates = ctx.input(2);
  const TensorView& out = ctx.output(0);
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.attrs().get_int_or("axis", 0), data.rank()));
  if (updates.shape != idx.shape) ctx.fail("updates shape ", shape_to_string(updates.shape), " differs from indices shape ", shape_to_string(idx.shape));
  check_index_shape(ctx, idx.shape, data.shape, axis, "indices");
  copy_bytes(data, out);
  for_each_reduction(ctx, data.dtype, ctx.attrs().get_string_or("reduction", "none"), [&](auto tag, auto op) {
    using T = decltype(tag);
    const T* u = updates.as<T>();
    T* y = out.as<T>();
    for_each_element_target(ctx, idx, data.shape, axis, [&](int64_t i, int64_t target) { op(y[target], u[i]); });
  });
}

void scatter_nd_kernel(KernelContext& ctx) {
  const TensorView& data = ctx.input(0);
  const TensorView& idx = ctx.input(1);
  const TensorView& updates = ctx.input(2);
  const TensorView& out = ctx.output(0);
  if (idx.rank() < 1) ctx.fail("indices must have rank >= 1");
  int64_t slice = 0;
  const std::vector<int64_t> offsets = nd_offsets(ctx, data, idx, 0, &slice);
  if (updates.numel() != static_cast<int64_t>(offsets.size()) * slice) {
    ctx.fail("updates shape ", shape_to_string(updates.shape), " does not match indices and data");
  }
  copy_bytes(data, out);
  for_each_reduction(ctx, data.dtype, ctx.attrs().get_string_or("reduction", "none"), [&](auto tag, auto op) {
    using T = decltype(tag);
    const T* u = updates.as<T>();
    T* y = out.as<T>();
    for (size_t t = 0; t < offsets.size(); ++t) {
      for (int64_t j = 0; j < slice; ++j) op(y[offsets[t] + j], u[static_cast<int64_t>(t) * slice + j]);
    }
  });
}

void one_hot_kernel(KernelContext& ctx) {
  const TensorView& indices = ctx.input(0);
  const TensorView& values = ctx.input(2);
  const TensorView& out = ctx.output(0);
  if (values.numel() != 2) ctx.fail("values must hold [off, on], it has ", values.numel(), " elements");
  const int64_t out_rank = out.rank();
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.attrs().get_int_or("axis", -1), out_rank));
  const int64_t depth = out.shape[axis];
  const size_t es = dtype_size(out.dtype);
  const auto* off_on = static_cast<const uint8_t*>(values.data);
  fill_elements(out.data, out.numel(), off_on, es);
  const int64_t outer = shape_product(indices.shape, 0, axis);
  const int64_t inner = shape_product(indices.shape, axis, indices.shape.size());
  auto* y = static_cast<uint8_t*>(out.data);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const double index = view_double_at(indices, o * inner + i);
      if (!(index > -9.2e18 && index < 9.2e18)) continue;  // NaN or far out of range: all "off", before the cast
      int64_t v = static_cast<int64_t>(index);
      if (v < 0) v += depth;
      if (v < 0 || v >= depth) continue;  // out of range: all "off", as ONNX specifies
      std::memcpy(y + ((o * depth + v) * inner + i) * static_cast<int64_t>(es), off_on + es, es);
    }
  }
}

/// Whether element i is non-zero (-0.0 is zero).
std::vector<uint8_t> non_zero_mask(const TensorView& x) {
  std::vector<uint8_t> mask(static_cast<size_t>(x.numel()));
  switch (x.dtype) {
    case DType::kFloat32:
      for (size_t i = 0; i < mask.size(); ++i) mask[i] = x.as<float>()[i] != 0.0f;
      break;
    case DType::kFloat64:
      for (size_t i = 0; i < mask.size(); ++i) mask[i] = x.as<double>()[i] != 0.0;
      break;
    case DType::kFloat16:
    case DType::kBFloat16:
      for (size_t i = 0; i < mask.size(); ++i) mask[i] = (x.as<uint16_t>()[i] & 0x7fff) != 0;
      break;
    default:
      dispatch_by_size(x.dtype, [&](auto tag) {
        using T = decltype(tag);
        for (size_t i = 0; i < mask.size(); ++i) mask[i] = x.as<T>()[i] != 0;
      });
  }
  return mask;
}

void non_zero_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const std::vector<uint8_t> mask = non_zero_mask(x);
  const int64_t count = std::count(mask.begin(), mask.end(), uint8_t{1});
  const size_t rank = x.shape.size();
  TensorView& out = ctx.allocate_output(0, DType::kInt64, {static_cast<int64_t>(rank), count});
  int64_t* y = out.as<int64_t>();
  std::vector<int64_t> index(rank, 0);
  int64_t column = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i]) {
      for (size_t d = 0; d < rank; ++d) y[static_cast<int64_t>(d) * count + column] = index[d];
      ++column;
    }
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < x.shape[d]) break;
      index[d] = 0;
    }
  }
}

void compress_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  const TensorView& condition = ctx.input(1);
  const TensorView& out = ctx.output(0);
  const uint8_t* keep = condition.as<uint8_t>();
  const size_t es = dtype_size(in.dtype);
  int64_t outer = 1, dim = in.numel(), inner = 1;
  if (ctx.attrs().has("axis")) {
    const size_t axis = static_cast<size_t>(normalize_axis(ctx.attrs().get_int("axis"), in.rank()));
    outer = shape_product(in.shape, 0, axis);
    dim = in.shape[axis];
    inner = shape_product(in.shape, axis + 1, in.shape.size());
  }
  const int64_t n = std::min(dim, condition.numel());
  const auto* x = static_cast<const uint8_t*>(in.data);
  auto* y = static_cast<uint8_t*>(out.data);
  const size_t block = static_cast<size_t>(inner) * es;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t j = 0; j < n; ++j) {
      if (!keep[j]) continue;
      std::memcpy(y, x + (o * dim + j) * static_cast<int64_t>(block), block);
      y += block;
    }
  }
}

}  // namespace

void register_tensor_index_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "Gather", .run = gather_kernel});
  registry.add({.op_type = "GatherElements", .run = gather_elements_kernel});
  registry.add({.op_type = "GatherND", .run = gather_nd_kernel});
  registry.add({.op_type = "ScatterElements", .run = scatter_elements_kernel});
  registry.add({.op_type = "Scatter", .run = scatter_elements_kernel});
  registry.add({.op_type = "ScatterND", .run = scatter_nd_kernel});
  registry.add({.op_type = "OneHot", .run = one_hot_kernel});
  registry.add({.op_type = "NonZero", .run = non_zero_kernel});
  registry.add({.op_type = "Compress", .run = compress_kernel});
  register_unique_kernel(registry);
}

}  // namespace tessera::native
