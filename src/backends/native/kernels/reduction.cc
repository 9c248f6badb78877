// Native kernels of the Reduce* ops, and the registration of the whole
// reduction family (ArgMax/ArgMin/TopK live in reduction_select.cc,
// Softmax/LogSoftmax/Hardmax in reduction_softmax.cc).
//
// Every reduction is brought to the form [outer, extent, inner] with the
// middle extent reduced: directly when the reduced axes are adjacent (after
// dropping size-1 dims), else after a permuted copy that moves the reduced
// axes last. Rows (inner == 1) are reduced with 16 independent lanes and
// columns (inner > 1) with one accumulator per column, so both inner loops
// vectorise without reassociating a single sum.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/native/dispatch.h"
#include "backends/native/kernel.h"
#include "backends/native/kernels/integer_arithmetic.h"
#include "backends/native/kernels/reduction_internal.h"
#include "ir/ops/reduction_internal.h"

namespace tessera::native {
namespace {

/// Accumulator type: the element type, except that integer inputs of the ops
/// whose result is not an integer computation (mean, L2, logs) use double.
template <typename T, bool kNeedsReal>
using AccumulatorOf = std::conditional_t<std::is_floating_point_v<T> || !kNeedsReal, T, double>;

// Each reduction: init, map of one element, combine of two partial results,
// finish (count = number of elements reduced, shift = per-output max for LogSumExp).
template <typename T>
struct SumReduce {
  using Acc = AccumulatorOf<T, false>;
  static constexpr bool kShiftByMax = false;
  static Acc init() { return Acc(0); }
  static Acc map(T x, Acc) { return Acc(x); }
  static Acc combine(Acc a, Acc b) { return add_wrapping(a, b); }
  static T finish(Acc a, int64_t, Acc) { return static_cast<T>(a); }
};
template <typename T>
struct MeanReduce {
  using Acc = AccumulatorOf<T, true>;
  static constexpr bool kShiftByMax = false;
  static Acc init() { return Acc(0); }
  static Acc map(T x, Acc) { return Acc(x); }
  static Acc combine(Acc a, Acc b) { return a + b; }
  static T finish(Acc a, int64_t n, Acc) { return real_to<T>(a / static_cast<Acc>(n)); }
};
template <typename T>
struct SumSquareReduce : SumReduce<T> {
  static T map(T x, T) { return mul_wrapping(x, x); }
};
template <typename T>
struct L1Reduce : SumReduce<T> {
  static T map(T x, T) {
    if constexpr (std::is_signed_v<T>) return x < T(0) ? sub_wrapping(T(0), x) : x;
    return x;
  }
};
template <typename T>
struct L2Reduce : MeanReduce<T> {
  using Acc = typename MeanReduce<T>::Acc;
  static Acc map(T x, Acc) { return Acc(x) * Acc(x); }
  static T finish(Acc a, int64_t, Acc) { return real_to<T>(std::sqrt(a)); }
};
template <typename T>
struct LogSumReduce : MeanReduce<T> {
  using Acc = typename MeanReduce<T>::Acc;
  static T finish(Acc a, int64_t, Acc) { return real_to<T>(std::log(a)); }
};
template <typename T>
struct LogSumExpReduce : MeanReduce<T> {
  using Acc = typename MeanReduce<T>::Acc;
  // exp(x - max) keeps large inputs finite; the max is added back in finish.
  static constexpr bool kShiftByMax = true;
  static Acc map(T x, Acc shift) { return std::exp(Acc(x) - shift); }
  static T finish(Acc a, int64_t, Acc shift) { return real_to<T>(std::log(a) + shift); }
};
template <typename T>
struct ProdReduce : SumReduce<T> {
  static T init() { return T(1); }
  static T combine(T a, T b) { return mul_wrapping(a, b); }
};
template <typename T>
struct MaxReduce : SumReduce<T> {
  static T init() {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
  }
  // NaN wins (numpy's max and torch.amax propagate it): b replaces a when it is larger or NaN,
  // and a NaN a is never replaced. Written as selects so the lane loops still vectorise.
  static T combine(T a, T b) { return (a < b || b != b) && a == a ? b : a; }
};
template <typename T>
struct MinReduce : SumReduce<T> {
  static T init() {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
  }
  static T combine(T a, T b) { return (b < a || b != b) && a == a ? b : a; }
};

/// The shift LogSumExp subtracts: the max, or 0 when the max is not finite.
template <typename Acc>
Acc usable_shift(Acc max) {
  if constexpr (std::is_floating_point_v<Acc>) return std::isfinite(max) ? max : Acc(0);
  return max;
}

constexpr int64_t kLanes = 16;
constexpr int64_t kColumnBlock = 256;

/// Reduces each contiguous row of x ([outer, extent]) into y[outer].
template <typename T, typename Op>
void reduce_rows(const T* x, T* y, int64_t outer, int64_t extent, ThreadPool& pool) {
  using Acc = typename Op::Acc;
  const int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, extent));
  pool.parallel_for(outer, grain, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const T* row = x + o * extent;
      Acc shift = Acc(0);
      if constexpr (Op::kShiftByMax) {
        Acc m = MaxReduce<Acc>::init();
        for (int64_t r = 0; r < extent; ++r) m = MaxReduce<Acc>::combine(m, Acc(row[r]));
        shift = usable_shift(m);
      }
      Acc lanes[kLanes];
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] = Op::init();
      int64_t r = 0;
      for (; r + kLanes <= extent; r += kLanes) {
        for (int64_t l = 0; l < kLanes; ++l) lanes[l] = Op::combine(lanes[l], Op::map(row[r + l], shift));
      }
      for (; r < extent; ++r) lanes[0] = Op::combine(lanes[0], Op::map(row[r], shift));
      Acc acc = lanes[0];
      for (int64_t l = 1; l < kLanes; ++l) acc = Op::combine(acc, lanes[l]);
      y[o] = Op::finish(acc, extent, shift);
    }
  });
}

/// Reduces x ([outer, extent, inner]) over the middle axis into y[outer, inner].
template <typename T, typename Op>
void reduce_columns(const T* x, T* y, int64_t outer, int64_t extent, int64_t inner, ThreadPool& pool) {
  using Acc = typename Op::Acc;
  const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  const int64_t grain = std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, extent * std::min(inner, kColumnBlock)));
  pool.parallel_for(outer * blocks, grain, [&](int64_t begin, int64_t end) {
    Acc acc[kColumnBlock];
    Acc shift[kColumnBlock];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t o = task / blocks;
      const int64_t j0 = (task % blocks) * kColumnBlock;
      const int64_t width = std::min(kColumnBlock, inner - j0);
      const T* base = x + o * extent * inner + j0;
      for (int64_t j = 0; j < width; ++j) {
        acc[j] = Op::init();
        shift[j] = Acc(0);
      }
      if constexpr (Op::kShiftByMax) {
        for (int64_t j = 0; j < width; ++j) shift[j] = MaxReduce<Acc>::init();
        for (int64_t r = 0; r < extent; ++r) {
          for (int64_t j = 0; j < width; ++j) shift[j] = MaxReduce<Acc>::combine(shift[j], Acc(base[r * inner + j]));
        }
        for (int64_t j = 0; j < width; ++j) shift[j] = usable_shift(shift[j]);
      }
      for (int64_t r = 0; r < extent; ++r) {
        const T* in = base + r * inner;
        for (int64_t j = 0; j < width; ++j) acc[j] = Op::combine(acc[j], Op::map(in[j], shift[j]));
      }
      T* out = y + o * inner + j0;
      for (int64_t j = 0; j < width; ++j) out[j] = Op::finish(acc[j], extent, shift[j]);
    }
  });
}

template <template <typename> class OpOf>
void reduce_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, reduce_kernel<OpOf>)) return;
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(1)) {
    const TensorView& a = ctx.input(1);
    axes.emplace();
    for (int64_t i = 0; i < a.numel(); ++i) axes->push_back(view_int_at(a, i));
  }
  std::vector<bool> mask;
  try {
    mask = reduction::reduced_axes_mask(x.rank(), axes, ctx.attrs().get_int_or("noop_with_empty_axes", 0) != 0);
  } catch (const Error& e) {
    ctx.fail(e.what());
  }
  dispatch_numeric(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    using Op = OpOf<T>;
    const T* in = x.as<T>();
    T* out = y.as<T>();
    if (y.numel() == 0) return;
    // Drop size-1 dims: whether they count as reduced does not change the result.
    Shape dims;
    std::vector<bool> reduced;
    for (size_t i = 0; i < x.shape.size(); ++i) {
      if (x.shape[i] == 1) continue;
      dims.push_back(x.shape[i]);
      reduced.push_back(mask[i]);
    }
    size_t first = reduced.size(), last = 0, count = 0;
    for (size_t i = 0; i < reduced.size(); ++i) {
      if (!reduced[i]) continue;
      first = std::min(first, i);
      last = i + 1;
      ++count;
    }
    if (count == 0) {
      // Nothing (but size-1 dims) is reduced: every output is its one input, finished.
      using Acc = typename Op::Acc;
      for (int64_t i = 0; i < y.numel(); ++i) {
        const Acc shift = Op::kShiftByMax ? usable_shift(Acc(in[i])) : Acc(0);
        out[i] = Op::finish(Op::combine(Op::init(), Op::map(in[i], shift)), 1, shift);
      }
      return;
    }
    if (last - first == count) {
      AxisSplit s = split_around(dims, first, last);
      if (s.inner == 1) {
        reduce_rows<T, Op>(in, out, s.outer, s.extent, ctx.pool());
      } else {
        reduce_columns<T, Op>(in, out, s.outer, s.extent, s.inner, ctx.pool());
      }
      return;
    }
    // Reduced axes not adjacent: move them last, then reduce rows.
    std::vector<int64_t> perm;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (!reduced[i]) perm.push_back(static_cast<int64_t>(i));
    }
    int64_t extent = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (reduced[i]) {
        perm.push_back(static_cast<int64_t>(i));
        extent *= dims[i];
      }
    }
    std::vector<T> moved(static_cast<size_t>(shape_numel(dims)));
    permute_copy(in, dims, perm, moved.data());
    reduce_rows<T, Op>(moved.data(), out, static_cast<int64_t>(moved.size()) / extent, extent, ctx.pool());
  });
}

}  // namespace

bool run_float16_through_float32(KernelContext& ctx, KernelFn kernel) {
  bool any = false;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) any |= ctx.has_input(i) && ctx.input(i).dtype == DType::kFloat16;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) any |= ctx.has_output(i) && ctx.output(i).dtype == DType::kFloat16;
  if (!any) return false;
  std::vector<Tensor> converted_inputs(ctx.num_inputs());
  std::vector<const TensorView*> inputs(ctx.num_inputs(), nullptr);
  std::vector<TensorView> input_views(ctx.num_inputs());
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    const TensorView& v = ctx.input(i);
    if (v.dtype == DType::kFloat16) {
      converted_inputs[i] = Tensor(DType::kFloat32, v.shape);
      const uint16_t* h = v.as<uint16_t>();
      float* f = converted_inputs[i].as<float>();
      for (int64_t k = 0; k < v.numel(); ++k) f[k] = half_to_float(h[k]);
      input_views[i] = converted_inputs[i].view();
    } else {
      input_views[i] = v;
    }
    inputs[i] = &input_views[i];
  }
  std::vector<Tensor> converted_outputs(ctx.num_outputs());
  std::vector<TensorView> output_views(ctx.num_outputs());
  std::vector<TensorView*> outputs(ctx.num_outputs(), nullptr);
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (!ctx.has_output(i)) continue;
    TensorView& v = ctx.output(i);
    if (v.dtype == DType::kFloat16) {
      converted_outputs[i] = Tensor(DType::kFloat32, v.shape);
      output_views[i] = converted_outputs[i].view();
      outputs[i] = &output_views[i];
    } else {
      outputs[i] = &v;
    }
  }
  KernelContext inner(ctx.node(), {inputs.data(), inputs.size()}, {outputs.data(), outputs.size()}, ctx.pool(),
                      ctx.state<void>(), [&](size_t, TensorView&) {
    throw_internal_error(ctx.node().describe(), ": float16 kernels cannot allocate outputs");
  });
  kernel(inner);
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (!converted_outputs[i].defined()) continue;
    const float* f = converted_outputs[i].as<float>();
    uint16_t* h = ctx.output(i).as<uint16_t>();
    for (int64_t k = 0; k < converted_outputs[i].numel(); ++k) h[k] = float_to_half(f[k]);
  }
  return true;
}

void register_reduction_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "ReduceSum", .run = reduce_kernel<SumReduce>});
  registry.add({.op_type = "ReduceMean", .run = reduce_kernel<MeanReduce>});
  registry.add({.op_type = "ReduceMax", .run = reduce_kernel<MaxReduce>});
  registry.add({.op_type = "ReduceMin", .run = reduce_kernel<MinReduce>});
  registry.add({.op_type = "ReduceProd", .run = reduce_kernel<ProdReduce>});
  registry.add({.op_type = "ReduceL1", .run = reduce_kernel<L1Reduce>});
  registry.add({.op_type = "ReduceL2", .run = reduce_kernel<L2Reduce>});
  registry.add({.op_type = "ReduceLogSum", .run = reduce_kernel<LogSumReduce>});
  registry.add({.op_type = "ReduceLogSumExp", .run = reduce_kernel<LogSumExpReduce>});
  registry.add({.op_type = "ReduceSumSquare", .run = reduce_kernel<SumSquareReduce>});
  registry.add({.op_type = "ArgMax", .run = argmax_kernel});
  registry.add({.op_type = "ArgMin", .run = argmin_kernel});
  registry.add({.op_type = "TopK", .run = topk_kernel});
  registry.add({.op_type = "Softmax", .run = softmax_kernel});
  registry.add({.op_type = "LogSoftmax", .run = log_softmax_kernel});
  registry.add({.op_type = "Hardmax", .run = hardmax_kernel});
}

}  // namespace tessera::native
