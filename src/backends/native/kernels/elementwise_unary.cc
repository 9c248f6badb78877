// Native kernels of unary math ops: Abs, Neg, Reciprocal, rounding, roots,
// exponentials, trigonometry, Sign, Erf, IsNaN, IsInf, Not.
#include <cmath>

#include "backends/native/kernels/elementwise_internal.h"

namespace tessera::native::elementwise {
namespace {

/// Predicate on floats; integer inputs are never NaN or infinite.
template <typename Predicate>
void float_predicate(KernelContext& ctx, Predicate predicate) {
  const TensorView& x = ctx.input(0);
  if (dtype_is_integer(x.dtype)) {
    std::fill_n(ctx.output(0).as<bool>(), x.numel(), false);
    return;
  }
  dispatch_floats(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    map_unary<T, bool>(ctx.pool(), x, ctx.output(0), predicate);
  });
}

void abs_kernel(KernelContext& ctx) {
  numeric_unary(ctx, [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_unsigned_v<C>) {
      return x;
    } else if constexpr (std::is_integral_v<C>) {
      // |minimum| wraps to the minimum, as in numpy.
      return x < C(0) ? sub_wrapping(C(0), x) : x;
    } else {
      return std::fabs(x);
    }
  });
}

void neg_kernel(KernelContext& ctx) {
  numeric_unary(ctx, [](auto x) {
    using C = decltype(x);
    // Negating the minimum wraps instead of overflowing.
    if constexpr (std::is_integral_v<C>) {
      return sub_wrapping(C(0), x);
    } else {
      return -x;
    }
  });
}

void sign_kernel(KernelContext& ctx) {
  numeric_unary(ctx, [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_floating_point_v<C>) {
      if (std::isnan(x)) return x;
    }
    return static_cast<C>((C(0) < x) - (x < C(0)));
  });
}

void isinf_kernel(KernelContext& ctx) {
  const bool positive = ctx.attrs().get_int_or("detect_positive", 1) != 0;
  const bool negative = ctx.attrs().get_int_or("detect_negative", 1) != 0;
  float_predicate(ctx, [=](auto x) { return std::isinf(x) && (x > 0 ? positive : negative); });
}

void not_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (x.dtype != DType::kBool) throw_unsupported(ctx.node().describe(), ": Not needs bool input, got ", dtype_name(x.dtype));
  map_unary<bool, bool>(ctx.pool(), x, ctx.output(0), [](bool v) { return !v; });
}

}  // namespace

void register_unary_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "Abs", .run = abs_kernel});
  registry.add({.op_type = "Neg", .run = neg_kernel});
  registry.add({.op_type = "Sign", .run = sign_kernel});
  registry.add({.op_type = "Not", .run = not_kernel});
  registry.add({.op_type = "IsInf", .run = isinf_kernel});
  registry.add({.op_type = "IsNaN", .run = [](KernelContext& ctx) {
                  float_predicate(ctx, [](auto x) { return std::isnan(x); });
                }});
  registry.add({.op_type = "Reciprocal", .run = [](KernelContext& ctx) {
                  float_unary(ctx, [](auto x) { return decltype(x)(1) / x; });
                }});
  registry.add({.op_type = "Floor", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::floor(x); }); }});
  registry.add({.op_type = "Ceil", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::ceil(x); }); }});
  // nearbyint in the default rounding mode rounds half to even, as ONNX Round requires.
  registry.add({.op_type = "Round", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::nearbyint(x); }); }});
  registry.add({.op_type = "Sqrt", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::sqrt(x); }); }});
  registry.add({.op_type = "Exp", .run = [](KernelContext& ctx) {
                  float_unary_with_span(ctx, float32_math().exp, [](auto x) { return std::exp(x); });
                }});
  registry.add({.op_type = "Log", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::log(x); }); }});
  registry.add({.op_type = "Sin", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::sin(x); }); }});
  registry.add({.op_type = "Cos", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::cos(x); }); }});
  registry.add({.op_type = "Tan", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::tan(x); }); }});
  registry.add({.op_type = "Asin", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::asin(x); }); }});
  registry.add({.op_type = "Acos", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::acos(x); }); }});
  registry.add({.op_type = "Atan", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::atan(x); }); }});
  registry.add({.op_type = "Sinh", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::sinh(x); }); }});
  registry.add({.op_type = "Cosh", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::cosh(x); }); }});
  registry.add({.op_type = "Asinh", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::asinh(x); }); }});
  registry.add({.op_type = "Acosh", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::acosh(x); }); }});
  registry.add({.op_type = "Atanh", .run = [](KernelContext& ctx) { float_unary(ctx, [](auto x) { return std::atanh(x); }); }});
  registry.add({.op_type = "Erf", .run = [](KernelContext& ctx) {
                  float_unary_with_span(ctx, float32_math().erf, [](auto x) { return std::erf(x); });
                }});
}

}  // namespace tessera::native::elementwise
