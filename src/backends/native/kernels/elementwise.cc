// Native kernels of element-wise ops: the broadcast planner shared by the
// element-wise kernel files, the data-movement ops (Cast, CastLike, Identity,
// Dropout in inference mode) and the family's registration. The math lives in
// elementwise_unary.cc, elementwise_activation.cc, elementwise_binary.cc and
// elementwise_variadic.cc.
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/native/cpu_features.h"
#include "backends/native/dispatch.h"
#include "backends/native/kernel.h"
#include "backends/native/kernels/elementwise_internal.h"

namespace tessera::native {
namespace elementwise {

BroadcastPlan plan_broadcast(const Shape* const* inputs, size_t count, const Shape& output) {
  if (count > 64) throw_internal_error("plan_broadcast: ", count, " inputs, at most 64");
  const size_t rank = output.size();
  struct Dim {
    int64_t size;
    uint64_t broadcast_mask;  // bit i: input i repeats along this dim
  };
  SmallVector<Dim, 8> dims;
  for (size_t d = 0; d < rank; ++d) {
    if (output[d] == 1) continue;  // size-1 dims do not move any offset
    uint64_t mask = 0;
    for (size_t i = 0; i < count; ++i) {
      const Shape& s = *inputs[i];
      const size_t pad = rank - s.size();
      if (s.size() > rank) throw_internal_error("plan_broadcast: input rank ", s.size(), " above output rank ", rank);
      int64_t size = d >= pad ? s[d - pad] : 1;
      if (size == 1) {
        mask |= uint64_t{1} << i;
      } else if (size != output[d]) {
        throw_internal_error("plan_broadcast: ", shape_to_string(s), " does not broadcast to ", shape_to_string(output));
      }
    }
    if (!dims.empty() && dims.back().broadcast_mask == mask) {
      dims.back().size *= output[d];
    } else {
      dims.push_back({output[d], mask});
    }
  }
  if (dims.empty()) dims.push_back({1, 0});

  BroadcastPlan plan;
  plan.numel = shape_numel(output);
  plan.inner = dims.back().size;
  for (size_t d = 0; d + 1 < dims.size(); ++d) plan.outer_dims.push_back(dims[d].size);
  const size_t outer = plan.outer_dims.size();
  plan.outer_strides.assign(count * outer, 0);
  plan.inner_steps.assign(count, 0);
  for (size_t i = 0; i < count; ++i) {
    int64_t running = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      const bool repeats = (dims[d].broadcast_mask >> i) & 1;
      const int64_t stride = repeats ? 0 : running;
      if (!repeats) running *= dims[d].size;
      if (d + 1 == dims.size()) {
        plan.inner_steps[i] = stride;
      } else {
        plan.outer_strides[i * outer + d] = stride;
      }
    }
  }
  return plan;
}

void BroadcastPlan::row_offsets(int64_t row, int64_t* offsets) const {
  const size_t count = inner_steps.size();
  for (size_t i = 0; i < count; ++i) offsets[i] = 0;
  for (size_t d = outer_dims.size(); d-- > 0;) {
    const int64_t index = row % outer_dims[d];
    row /= outer_dims[d];
    for (size_t i = 0; i < count; ++i) offsets[i] += index * outer_stride(i, d);
  }
}

}  // namespace elementwise

namespace {

using namespace elementwise;

/// Float to integer conversion without undefined behaviour: NaN gives 0 and
/// out-of-range values saturate (ONNX leaves these cases undefined).
template <typename Out, typename In>
Out convert_value(In v) {
  if constexpr (std::is_integral_v<Out> && !std::is_same_v<Out, bool> && std::is_floating_point_v<In>) {
    return float_to_integer<Out>(v);
  } else {
    // double to float16 goes through float (store's rule): it can round twice,
    // which only changes exact ties.
    return store<Out>(v);
  }
}

}  // namespace
// Defined in cast_half_avx2.cc.
void half_to_float_avx2(const uint16_t* in, float* out, int64_t n);
void float_to_half_avx2(const float* in, uint16_t* out, int64_t n);
namespace {

void cast_view(ThreadPool& pool, const TensorView& x, const TensorView& y) {
  if (x.dtype == y.dtype) return copy_view_data(y, x);
  // float16 <-> float32 (a float16 model's inputs and outputs): F16C where the CPU has AVX2.
  if (cpu_features().avx2_fma && ((x.dtype == DType::kFloat16 && y.dtype == DType::kFloat32) ||
                                  (x.dtype == DType::kFloat32 && y.dtype == DType::kFloat16))) {
    const bool widen = x.dtype == DType::kFloat16;
    pool.parallel_for(x.numel(), kGrain, [&](int64_t begin, int64_t end) {
      if (widen) half_to_float_avx2(x.as<uint16_t>() + begin, y.as<float>() + begin, end - begin);
      else float_to_half_avx2(x.as<float>() + begin, y.as<uint16_t>() + begin, end - begin);
    });
    return;
  }
  dispatch_all(x.dtype, [&](auto in_tag) {
    using In = decltype(in_tag);
    dispatch_all(y.dtype, [&](auto out_tag) {
      using Out = decltype(out_tag);
      const In* in = x.as<In>();
      Out* out = y.as<Out>();
      pool.parallel_for(x.numel(), kGrain, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = convert_value<Out>(load(in[i]));
      });
    });
  });
}

void cast_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  const TensorView& y = ctx.output(0);
  if (x.dtype != y.dtype && (x.dtype == DType::kString || y.dtype == DType::kString)) return cast_strings(ctx, x, y);
  cast_view(ctx.pool(), x, y);
}

void copy_kernel(KernelContext& ctx) { copy_view_data(ctx.output(0), ctx.input(0)); }

void dropout_kernel(KernelContext& ctx) {
  // Inference only: training_mode (opset 12+) must be false, or the ratio 0
  // (nothing dropped). The schema rejects constants; this catches fed values.
  const bool training = ctx.has_input(2) && ctx.input(2).numel() > 0 && view_double_at(ctx.input(2), 0) != 0;
  const bool zero_ratio = ctx.has_input(1) && ctx.input(1).numel() == 1 && view_double_at(ctx.input(1), 0) == 0;
  if (training && !zero_ratio) {
    throw_unsupported(ctx.node().describe(), ": training_mode=true (random dropout) is not supported");
  }
  copy_kernel(ctx);
  if (ctx.has_output(1)) {
    const TensorView& mask = ctx.output(1);
    dispatch_all(mask.dtype, [&](auto tag) {
      using T = decltype(tag);
      T* out = mask.as<T>();
      const T one = store<T>(1.0f);
      for (int64_t i = 0; i < mask.numel(); ++i) out[i] = one;
    });
  }
}

/// Identity of a tensor copies it; of a sequence or optional, shares its tensors (never written in place).
void identity_kernel(KernelContext& ctx) {
  if (const BoxedValue* in = ctx.boxed_input(0)) {
    BoxedValue* out = ctx.boxed_output(0);
    if (!out) ctx.fail("input 0 is ", value_kind_phrase(in->kind), " but output 0 is a tensor");
    *out = *in;
    return;
  }
  copy_kernel(ctx);
}

}  // namespace

void register_elementwise_kernels(KernelRegistry& registry) {
  register_unary_kernels(registry);
  register_activation_kernels(registry);
  register_binary_kernels(registry);
  register_variadic_kernels(registry);
  registry.add({.op_type = "Cast", .run = cast_kernel});
  registry.add({.op_type = "CastLike", .run = cast_kernel});
  registry.add({.op_type = "Identity", .run = identity_kernel});
  registry.add({.op_type = "Dropout", .run = dropout_kernel});
}

}  // namespace tessera::native
