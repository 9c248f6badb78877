// Native kernels of element-wise ops. Binary ops broadcast with numpy rules.
#include <algorithm>
#include <cmath>

#include "backends/native/dispatch.h"
#include "backends/native/kernel.h"
#include "ir/shape_util.h"

namespace tessera::native {
namespace {

void relu_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& y = ctx.output(0);
  dispatch_numeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* out = y.as<T>();
    ctx.pool().parallel_for(x.numel(), 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) out[i] = std::max(in[i], T(0));
    });
  });
}

/// Applies op over the broadcast of a and b into y.
template <typename T, typename R, typename Op>
void broadcast_binary(const TensorView& a, const TensorView& b, const TensorView& y, Op op) {
  const T* pa = a.as<T>();
  const T* pb = b.as<T>();
  R* py = y.as<R>();
  const int64_t n = y.numel();
  if (a.shape == b.shape) {
    for (int64_t i = 0; i < n; ++i) py[i] = op(pa[i], pb[i]);
    return;
  }
  if (b.numel() == 1) {
    T s = pb[0];
    for (int64_t i = 0; i < n; ++i) py[i] = op(pa[i], s);
    return;
  }
  const size_t rank = y.shape.size();
  std::vector<int64_t> sa = broadcast_strides(a.shape, y.shape);
  std::vector<int64_t> sb = broadcast_strides(b.shape, y.shape);
  std::vector<int64_t> index(rank, 0);
  int64_t oa = 0, ob = 0;
  for (int64_t i = 0; i < n; ++i) {
    py[i] = op(pa[oa], pb[ob]);
    for (size_t d = rank; d-- > 0;) {
      oa += sa[d];
      ob += sb[d];
      if (++index[d] < y.shape[d]) break;
      oa -= sa[d] * y.shape[d];
      ob -= sb[d] * y.shape[d];
      index[d] = 0;
    }
  }
}

void add_kernel(KernelContext& ctx) {
  dispatch_numeric(ctx.input(0).dtype, [&](auto tag) {
    using T = decltype(tag);
    broadcast_binary<T, T>(ctx.input(0), ctx.input(1), ctx.output(0), [](T x, T y) { return static_cast<T>(x + y); });
  });
}

}  // namespace

void register_elementwise_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "Relu", .run = relu_kernel});
  registry.add({.op_type = "Add", .run = add_kernel});
}

}  // namespace tessera::native
