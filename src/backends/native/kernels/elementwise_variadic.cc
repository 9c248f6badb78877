// Native kernels of ops over several broadcast inputs: Max, Min, Sum, Mean
// (1..N inputs) and Where (condition, X, Y).
#include <cmath>
#include <cstring>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/elementwise_internal.h"

namespace tessera::native::elementwise {
namespace {

/// y = op(...op(op(x0, x1), x2)..., xn) with every input broadcast to y.
/// The first step writes y from x0 and x1; later steps update y in place,
/// which is safe because y is read at the position it is written.
template <typename Op>
void fold_inputs(KernelContext& ctx, Op op) {
  const TensorView& y = ctx.output(0);
  const DType dtype = ctx.input(0).dtype;
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.input(i).dtype != dtype) ctx.fail("input ", i, " has dtype ", dtype_name(ctx.input(i).dtype), ", input 0 has ", dtype_name(dtype));
  }
  dispatch_numbers(dtype, [&](auto tag) {
    using T = decltype(tag);
    if (ctx.num_inputs() == 1) {
      // One input: a broadcast copy (the shapes are equal).
      if (y.nbytes()) std::memcpy(y.data, ctx.input(0).data, y.nbytes());
      return;
    }
    broadcast_binary<T, T, T>(ctx.pool(), ctx.input(0), ctx.input(1), y, op);
    for (size_t i = 2; i < ctx.num_inputs(); ++i) broadcast_binary<T, T, T>(ctx.pool(), y, ctx.input(i), y, op);
  });
}

/// numpy's maximum/minimum: NaN in either input gives NaN.
template <typename C>
C maximum(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a) || std::isnan(b)) return a + b;
  }
  return a < b ? b : a;
}

template <typename C>
C minimum(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (std::isnan(a) || std::isnan(b)) return a + b;
  }
  return b < a ? b : a;
}

void mean_kernel(KernelContext& ctx) {
  fold_inputs(ctx, [](auto a, auto b) { return a + b; });
  const double count = static_cast<double>(ctx.num_inputs());
  dispatch_floats(ctx.output(0).dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    const C scale = static_cast<C>(1.0 / count);
    map_unary<T, T>(ctx.pool(), ctx.output(0), ctx.output(0), [=](C v) { return v * scale; });
  });
}

void where_kernel(KernelContext& ctx) {
  const TensorView& condition = ctx.input(0);
  const TensorView& x = ctx.input(1);
  const TensorView& y = ctx.input(2);
  const TensorView& out = ctx.output(0);
  if (condition.dtype != DType::kBool) ctx.fail("condition must be bool, is ", dtype_name(condition.dtype));
  if (x.dtype != y.dtype) ctx.fail("X and Y have different dtypes ", dtype_name(x.dtype), " and ", dtype_name(y.dtype));
  const Shape* shapes[] = {&condition.shape, &x.shape, &y.shape};
  BroadcastPlan plan = plan_broadcast(shapes, 3, out.shape);
  const int64_t step_c = plan.inner_steps[0], step_x = plan.inner_steps[1], step_y = plan.inner_steps[2];
  const bool* pc = condition.as<bool>();
  // Where only moves elements, so the element size is all that matters.
  dispatch_by_size(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.as<T>();
    const T* py = y.as<T>();
    T* po = out.as<T>();
    for_each_run(ctx.pool(), plan, [&](const int64_t* offsets, int64_t count, int64_t out_pos) {
      const bool* rc = pc + offsets[0];
      const T* rx = px + offsets[1];
      const T* ry = py + offsets[2];
      T* ro = po + out_pos;
      if (step_c && step_x && step_y) {
        for (int64_t i = 0; i < count; ++i) ro[i] = rc[i] ? rx[i] : ry[i];
      } else {
        for (int64_t i = 0; i < count; ++i) ro[i] = rc[i * step_c] ? rx[i * step_x] : ry[i * step_y];
      }
    });
  });
}

}  // namespace

void register_variadic_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "Max", .run = [](KernelContext& ctx) { fold_inputs(ctx, [](auto a, auto b) { return maximum(a, b); }); }});
  registry.add({.op_type = "Min", .run = [](KernelContext& ctx) { fold_inputs(ctx, [](auto a, auto b) { return minimum(a, b); }); }});
  registry.add({.op_type = "Sum", .run = [](KernelContext& ctx) { fold_inputs(ctx, [](auto a, auto b) { return a + b; }); }});
  registry.add({.op_type = "Mean", .run = mean_kernel});
  registry.add({.op_type = "Where", .run = where_kernel});
}

}  // namespace tessera::native::elementwise
