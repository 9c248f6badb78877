// Native kernels that select elements along one axis: ArgMax, ArgMin, TopK.
// Ties go to the lowest index (ArgMax/ArgMin unless select_last_index, and
// TopK always), as ONNX's reference does. NaN ranks above every number, as in
// numpy and PyTorch.
#include <algorithm>
#include <numeric>
#include <vector>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/reduction_internal.h"

namespace tessera::native {
namespace {

int64_t axis_attribute(const KernelContext& ctx, const TensorView& x, int64_t fallback) {
  int64_t axis = ctx.attrs().get_int_or("axis", fallback);
  if (axis < -x.rank() || axis >= x.rank()) ctx.fail("axis ", axis, " is out of range for rank ", x.rank());
  return axis < 0 ? axis + x.rank() : axis;
}

template <bool kMax>
void arg_extreme_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, arg_extreme_kernel<kMax>)) return;
  const TensorView& x = ctx.input(0);
  const size_t axis = static_cast<size_t>(axis_attribute(ctx, x, 0));
  const bool last = ctx.attrs().get_int_or("select_last_index", 0) != 0;
  const AxisSplit s = split_around(x.shape, axis, axis + 1);
  if (s.extent == 0 && s.outer * s.inner != 0) ctx.fail("cannot take Arg", kMax ? "Max" : "Min", " over an empty axis");
  int64_t* out = ctx.output(0).as<int64_t>();
  dispatch_numeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    // Is candidate better than current? Strictly for the first index, or-equal for the last.
    // NaN beats every number for both ArgMax and ArgMin (numpy's argmax/argmin and torch's
    // pick the first NaN, ONNX's reference uses numpy); among NaNs the index rule holds.
    auto better = [&](T candidate, T current) {
      if (candidate != candidate) return last || current == current;
      if (current != current) return false;
      if (last) return kMax ? candidate >= current : candidate <= current;
      return kMax ? candidate > current : candidate < current;
    };
    const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, s.extent));
    ctx.pool().parallel_for(s.outer * s.inner, grain, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / s.inner, j = t % s.inner;
        const T* base = in + o * s.extent * s.inner + j;
        T best_value = base[0];
        int64_t best = 0;
        for (int64_t r = 1; r < s.extent; ++r) {
          if (better(base[r * s.inner], best_value)) {
            best_value = base[r * s.inner];
            best = r;
          }
        }
        out[t] = best;
      }
    });
  });
}

}  // namespace

void argmax_kernel(KernelContext& ctx) { arg_extreme_kernel<true>(ctx); }
void argmin_kernel(KernelContext& ctx) { arg_extreme_kernel<false>(ctx); }

void topk_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, topk_kernel)) return;
  const TensorView& x = ctx.input(0);
  const size_t axis = static_cast<size_t>(axis_attribute(ctx, x, -1));
  const AxisSplit s = split_around(x.shape, axis, axis + 1);
  const TensorView& k_view = ctx.input(1);
  if (k_view.numel() != 1) ctx.fail("K must hold exactly one value, got ", k_view.numel());
  const int64_t k = view_int_at(k_view, 0);
  if (k < 0 || k > s.extent) ctx.fail("K = ", k, " is out of range for axis ", axis, " of size ", s.extent);
  const bool largest = ctx.attrs().get_int_or("largest", 1) != 0;
  TensorView& values = ctx.output(0);
  int64_t* indices = ctx.has_output(1) ? ctx.output(1).as<int64_t>() : nullptr;
  if (k == 0) return;
  dispatch_numeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* out = values.as<T>();
    const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, s.extent));
    ctx.pool().parallel_for(s.outer * s.inner, grain, [&](int64_t begin, int64_t end) {
      std::vector<int64_t> order(static_cast<size_t>(s.extent));
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / s.inner, j = t % s.inner;
        const T* base = in + o * s.extent * s.inner + j;
        std::iota(order.begin(), order.end(), int64_t{0});
        // Results are always sorted (sorted=0 leaves the order unspecified); ties by index.
        // NaN counts as larger than +inf (as torch.topk does): first when largest, last
        // otherwise. This also keeps the order strict and weak, which partial_sort needs.
        auto before = [&](int64_t a, int64_t b) {
          const T va = base[a * s.inner], vb = base[b * s.inner];
          const bool nan_a = va != va, nan_b = vb != vb;
          if (nan_a != nan_b) return largest ? nan_a : nan_b;
          if (!nan_a && va != vb) return largest ? va > vb : va < vb;
          return a < b;
        };
        std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
        for (int64_t i = 0; i < k; ++i) {
          const int64_t dst = (o * k + i) * s.inner + j;
          out[dst] = base[order[static_cast<size_t>(i)] * s.inner];
          if (indices) indices[dst] = order[static_cast<size_t>(i)];
        }
      }
    });
  });
}

}  // namespace tessera::native
