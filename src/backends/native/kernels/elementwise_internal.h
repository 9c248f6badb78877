// Shared machinery of the element-wise kernels (elementwise*.cc):
//  - Float16 / BFloat16 element types that compute through float, so one
//    generic lambda serves every floating dtype;
//  - dtype dispatch over all numeric types (and bool);
//  - a parallel unary map and broadcasting binary / n-ary loops with fast
//    paths for same-shape, scalar and trailing-dimension broadcasts.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/integer_arithmetic.h"
#include "backends/native/kernel.h"
#include "ir/small_vector.h"
#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/tensor.h"

namespace tessera::native::elementwise {

/// Cast / CastLike between a string tensor and a numeric or bool one
/// (elementwise_string.cc): numbers print as the shortest decimal text that
/// reads back to the same value, "NaN", "INF" and "-INF"; text reads as a
/// decimal or scientific number, "INF", "+INF", "-INF" and "NaN" in any case.
void cast_strings(const KernelContext& ctx, const TensorView& x, const TensorView& y);

/// Elements per parallel chunk: element-wise loops are memory bound, so chunks
/// only need to be big enough to amortise the hand-off to a worker.
constexpr int64_t kGrain = 1 << 14;

struct Float16 {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

template <typename T>
constexpr bool kIsReduced = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

/// The type arithmetic on T is done in: float for the 16-bit floats, T otherwise.
template <typename T>
using Compute = std::conditional_t<kIsReduced<T>, float, T>;

template <typename T>
inline Compute<T> load(T v) {
  if constexpr (std::is_same_v<T, Float16>) {
    return half_to_float(v.bits);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return bfloat16_to_float(v.bits);
  } else {
    return v;
  }
}

/// Converts a computed value into element type T.
template <typename T, typename C>
inline T store(C v) {
  if constexpr (std::is_same_v<T, Float16>) {
    return Float16{float_to_half(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return BFloat16{float_to_bfloat16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != C(0);
  } else {
    return static_cast<T>(v);
  }
}

template <typename T>
constexpr bool kIsFloat = std::is_floating_point_v<T> || kIsReduced<T>;

/// Calls fn(T{}) for float32, float64, float16 and bfloat16.
template <typename Fn>
decltype(auto) dispatch_floats(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    case DType::kFloat16: return fn(Float16{});
    case DType::kBFloat16: return fn(BFloat16{});
    default: throw_unsupported("dtype ", dtype_name(dtype), " is not supported here (floating types are)");
  }
}

/// Calls fn(T{}) for every float and integer type.
template <typename Fn>
decltype(auto) dispatch_numbers(DType dtype, Fn&& fn) {
  if (dtype_is_float(dtype)) return dispatch_floats(dtype, std::forward<Fn>(fn));
  return dispatch_integer(dtype, std::forward<Fn>(fn));
}

/// Calls fn(T{}) for every numeric type and bool.
template <typename Fn>
decltype(auto) dispatch_all(DType dtype, Fn&& fn) {
  if (dtype == DType::kBool) return fn(bool{});
  return dispatch_numbers(dtype, std::forward<Fn>(fn));
}

/// y[i] = op(x[i]) in parallel; op takes and returns compute values.
template <typename In, typename Out, typename Op>
void map_unary(ThreadPool& pool, const TensorView& x, const TensorView& y, Op op) {
  const In* in = x.as<In>();
  Out* out = y.as<Out>();
  pool.parallel_for(x.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = store<Out>(op(load(in[i])));
  });
}

/// y = op(x) for the floating dtypes (y has x's dtype).
template <typename Op>
void float_unary(KernelContext& ctx, Op op) {
  dispatch_floats(ctx.input(0).dtype, [&](auto tag) {
    using T = decltype(tag);
    map_unary<T, T>(ctx.pool(), ctx.input(0), ctx.output(0), op);
  });
}

/// y = op(x) for every numeric dtype (y has x's dtype).
template <typename Op>
void numeric_unary(KernelContext& ctx, Op op) {
  dispatch_numbers(ctx.input(0).dtype, [&](auto tag) {
    using T = decltype(tag);
    map_unary<T, T>(ctx.pool(), ctx.input(0), ctx.output(0), op);
  });
}

/// The output of a broadcast seen as rows: `outer` dims (iterated with
/// per-input strides) times a contiguous inner run in which each input either
/// advances (step 1) or repeats one element (step 0). Adjacent dims with the
/// same broadcast pattern are merged first, so a per-channel bias over NCHW
/// becomes rows of H*W with the bias fixed per row.
/// In place up to a few dims and inputs: planning a small op allocates nothing.
struct BroadcastPlan {
  SmallVector<int64_t, 8> outer_dims;
  SmallVector<int64_t, 16> outer_strides;  // [input * outer_dims.size() + outer dim]
  SmallVector<int64_t, 8> inner_steps;     // [input], 0 or 1
  int64_t inner = 1;
  int64_t numel = 0;

  int64_t outer_stride(size_t input, size_t dim) const { return outer_strides[input * outer_dims.size() + dim]; }
  /// Element offset of each input at the start of row `row`.
  void row_offsets(int64_t row, int64_t* offsets) const;
};

/// Plans reading each of the `count` shapes at `inputs` broadcast to `output`.
BroadcastPlan plan_broadcast(const Shape* const* inputs, size_t count, const Shape& output);

/// Calls fn(offsets, count, out_offset) over [0, numel) in parallel, one call
/// per contiguous run of at most one row.
template <typename Fn>
void for_each_run(ThreadPool& pool, const BroadcastPlan& plan, Fn fn) {
  const size_t k = plan.inner_steps.size();
  pool.parallel_for(plan.numel, kGrain, [&](int64_t begin, int64_t end) {
    SmallVector<int64_t, 8> offset_storage(k, 0);
    int64_t* offsets = offset_storage.data();
    int64_t pos = begin;
    while (pos < end) {
      int64_t row = pos / plan.inner;
      int64_t col = pos % plan.inner;
      plan.row_offsets(row, offsets);
      for (size_t i = 0; i < k; ++i) offsets[i] += col * plan.inner_steps[i];
      int64_t count = std::min(plan.inner - col, end - pos);
      fn(offsets, count, pos);
      pos += count;
    }
  });
}

/// y = op(a, b) with numpy broadcasting of a and b to y's shape. op takes
/// compute values of A and B and returns a value stored as R.
template <typename A, typename B, typename R, typename Op>
void broadcast_binary(ThreadPool& pool, const TensorView& a, const TensorView& b, const TensorView& y, Op op) {
  const A* pa = a.as<A>();
  const B* pb = b.as<B>();
  R* py = y.as<R>();
  // The four step combinations get their own loops so that the common ones
  // (both advance; one is fixed) compile to plain vectorisable loops.
  auto run = [&op](const A* ra, const B* rb, R* ry, int64_t count, bool step_a, bool step_b) {
    if (step_a && step_b) {
      for (int64_t i = 0; i < count; ++i) ry[i] = store<R>(op(load(ra[i]), load(rb[i])));
    } else if (step_a) {
      const auto vb = load(rb[0]);
      for (int64_t i = 0; i < count; ++i) ry[i] = store<R>(op(load(ra[i]), vb));
    } else if (step_b) {
      const auto va = load(ra[0]);
      for (int64_t i = 0; i < count; ++i) ry[i] = store<R>(op(va, load(rb[i])));
    } else {
      const R v = store<R>(op(load(ra[0]), load(rb[0])));
      for (int64_t i = 0; i < count; ++i) ry[i] = v;
    }
  };
  // Each operand whole (as many elements as y: broadcasting repeats none of them, so it is y's
  // order) or one element: no plan, nothing allocated (a small Loop trip's adds made ten
  // allocations each planning).
  const int64_t n = y.numel();
  const bool a_whole = a.numel() == n, b_whole = b.numel() == n;
  if ((a_whole || a.numel() == 1) && (b_whole || b.numel() == 1)) {
    pool.parallel_for(n, kGrain, [&](int64_t begin, int64_t end) {
      run(pa + (a_whole ? begin : 0), pb + (b_whole ? begin : 0), py + begin, end - begin, a_whole, b_whole);
    });
    return;
  }
  const Shape* shapes[] = {&a.shape, &b.shape};
  BroadcastPlan plan = plan_broadcast(shapes, 2, y.shape);
  const int64_t step_a = plan.inner_steps[0];
  const int64_t step_b = plan.inner_steps[1];
  for_each_run(pool, plan, [&](const int64_t* offsets, int64_t count, int64_t out_pos) {
    run(pa + offsets[0], pb + offsets[1], py + out_pos, count, step_a != 0, step_b != 0);
  });
}

/// Plain reference of broadcast_binary (index arithmetic per element), for tests.
template <typename A, typename B, typename R, typename Op>
void broadcast_binary_reference(const TensorView& a, const TensorView& b, const TensorView& y, Op op) {
  const size_t rank = y.shape.size();
  auto offset_of = [&](const Shape& shape, int64_t flat) {
    // Walk output dims from the innermost; dims of size 1 in `shape` read index 0.
    int64_t offset = 0, stride = 1;
    for (size_t d = rank; d-- > 0;) {
      int64_t index = flat % y.shape[d];
      flat /= y.shape[d];
      const int64_t from_end = static_cast<int64_t>(rank - d);
      if (from_end <= static_cast<int64_t>(shape.size())) {
        int64_t size = shape[shape.size() - static_cast<size_t>(from_end)];
        if (size != 1) offset += index * stride;
        stride *= size;
      }
    }
    return offset;
  };
  for (int64_t i = 0; i < y.numel(); ++i) {
    y.as<R>()[i] = store<R>(op(load(a.as<A>()[offset_of(a.shape, i)]), load(b.as<B>()[offset_of(b.shape, i)])));
  }
}

/// Vectorisable float32 math over contiguous spans (elementwise_math.h),
/// one set per ISA build.
struct Float32MathSpans {
  using Span = void (*)(const float* x, float* y, int64_t n);
  Span exp;
  Span sigmoid;
  Span tanh;
  Span erf;
};
const Float32MathSpans& float32_math();  // the best for this CPU
const Float32MathSpans& float32_math_baseline();
const Float32MathSpans& float32_math_avx2();
const Float32MathSpans& float32_math_avx512();

/// y = span(x) over float32 tensors, in parallel chunks.
inline void map_float32_span(ThreadPool& pool, const TensorView& x, const TensorView& y, Float32MathSpans::Span span) {
  const float* in = x.as<float>();
  float* out = y.as<float>();
  pool.parallel_for(x.numel(), kGrain, [&](int64_t begin, int64_t end) { span(in + begin, out + begin, end - begin); });
}

/// float_unary with float32 taken by a vectorised span (the other dtypes,
/// and the tests' reference, use op).
template <typename Op>
void float_unary_with_span(KernelContext& ctx, Float32MathSpans::Span span, Op op) {
  if (ctx.input(0).dtype == DType::kFloat32) return map_float32_span(ctx.pool(), ctx.input(0), ctx.output(0), span);
  float_unary(ctx, op);
}

// Registration of the kernel groups (one per file), called from elementwise.cc.
void register_unary_kernels(KernelRegistry& registry);
void register_activation_kernels(KernelRegistry& registry);
void register_binary_kernels(KernelRegistry& registry);
void register_variadic_kernels(KernelRegistry& registry);

}  // namespace tessera::native::elementwise
