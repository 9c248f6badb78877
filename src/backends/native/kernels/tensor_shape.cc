// Native kernels of shape ops: Constant, ConstantOfShape, Reshape, Flatten,
// Squeeze, Unsqueeze (copies for now), Shape, Size, Range, Expand, EyeLike.
#include <cstring>
#include <type_traits>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/tensor_internal.h"
#include "ir/ops/tensor_internal.h"
#include "ir/shape_util.h"

namespace tessera::native {
namespace {

void constant_kernel(KernelContext& ctx) {
  const Attribute* value = ctx.attrs().find("value");
  if (!value || !value->tensor) ctx.fail("has no value attribute");
  copy_bytes(value->tensor->view(), ctx.output(0));
}

void constant_of_shape_kernel(KernelContext& ctx) {
  const TensorView& out = ctx.output(0);
  const Attribute* value = ctx.attrs().find("value");
  if (!value || !value->tensor) {
    std::memset(out.data, 0, out.nbytes());  // default: float32 zeros
    return;
  }
  fill_elements(out.data, out.numel(), value->tensor->data(), dtype_size(out.dtype));
}

/// Reshape, Flatten, Squeeze, Unsqueeze: same bytes, new shape (none to copy
/// where the store let the output alias the input).
void copy_kernel(KernelContext& ctx) {
  if (ctx.output(0).data != ctx.input(0).data) copy_bytes(ctx.input(0), ctx.output(0));
}

void shape_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  auto [start, end] = shape_op_range(ctx.attrs(), in.rank());
  int64_t* out = ctx.output(0).as<int64_t>();
  for (int64_t i = start; i < end; ++i) out[i - start] = in.shape[static_cast<size_t>(i)];
}

void size_kernel(KernelContext& ctx) { ctx.output(0).as<int64_t>()[0] = ctx.input(0).numel(); }

void range_kernel(KernelContext& ctx) {
  const TensorView& out = ctx.output(0);
  dispatch_numeric(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T start = ctx.input(0).as<T>()[0];
    const T delta = ctx.input(2).as<T>()[0];
    T* y = out.as<T>();
    if constexpr (std::is_integral_v<T>) {
      // Every value lies in [start, limit), but i * delta alone may not fit in T (Range(-2^63, 2^63-1, 2^62)).
      for (int64_t i = 0; i < out.numel(); ++i) y[i] = static_cast<T>(static_cast<__int128>(start) + static_cast<__int128>(i) * delta);
    } else {
      for (int64_t i = 0; i < out.numel(); ++i) y[i] = static_cast<T>(start + static_cast<T>(i) * delta);
    }
  });
}

void expand_kernel(KernelContext& ctx) {
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  strided_copy(ctx.pool(), dtype_size(in.dtype), in.data, 0, broadcast_strides(in.shape, out.shape), out.data, out.shape);
}

void eye_like_kernel(KernelContext& ctx) {
  const TensorView& out = ctx.output(0);
  std::memset(out.data, 0, out.nbytes());
  const int64_t rows = out.shape[0], cols = out.shape[1];
  const int64_t k = ctx.attrs().get_int_or("k", 0);
  const size_t size = dtype_size(out.dtype);
  uint8_t one[8];
  store_scalar(out.dtype, 1.0, one);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t j = i + k;
    if (j >= 0 && j < cols) std::memcpy(static_cast<uint8_t*>(out.data) + (i * cols + j) * static_cast<int64_t>(size), one, size);
  }
}

}  // namespace

void register_tensor_shape_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "Constant", .run = constant_kernel});
  registry.add({.op_type = "ConstantOfShape", .run = constant_of_shape_kernel});
  for (const char* op : {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}) registry.add({.op_type = op, .run = copy_kernel, .output_aliases_input = true});
  registry.add({.op_type = "Shape", .run = shape_kernel});
  registry.add({.op_type = "Size", .run = size_kernel});
  registry.add({.op_type = "Range", .run = range_kernel});
  registry.add({.op_type = "Expand", .run = expand_kernel});
  registry.add({.op_type = "EyeLike", .run = eye_like_kernel});
}

}  // namespace tessera::native
