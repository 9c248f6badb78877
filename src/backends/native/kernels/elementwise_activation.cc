// Native kernels of activation functions: Relu, LeakyRelu, PRelu, Sigmoid,
// Tanh, HardSigmoid, HardSwish, Clip, Softplus, Softsign, Elu, Selu, Celu,
// ThresholdedRelu, Shrink.
#include <cmath>
#include <limits>

#include "backends/native/kernels/elementwise_internal.h"

namespace tessera::native::elementwise {
namespace {

float attr(const KernelContext& ctx, const char* name, float fallback) { return ctx.attrs().get_float_or(name, fallback); }

void relu_kernel(KernelContext& ctx) {
  // Written as a select so NaN passes through like numpy's maximum.
  numeric_unary(ctx, [](auto x) { return x < decltype(x)(0) ? decltype(x)(0) : x; });
}

void leaky_relu_kernel(KernelContext& ctx) {
  const float alpha = attr(ctx, "alpha", 0.01f);
  float_unary(ctx, [=](auto x) {
    using C = decltype(x);
    return x < C(0) ? C(alpha) * x : x;
  });
}

void prelu_kernel(KernelContext& ctx) {
  // slope broadcasts to X's shape (unidirectionally; shape inference checked it).
  dispatch_numbers(ctx.input(0).dtype, [&](auto tag) {
    using T = decltype(tag);
    if (ctx.input(1).dtype != ctx.input(0).dtype) ctx.fail("slope dtype ", dtype_name(ctx.input(1).dtype), " differs from X's");
    broadcast_binary<T, T, T>(ctx.pool(), ctx.input(0), ctx.input(1), ctx.output(0), [](auto x, auto slope) {
      using C = decltype(x);
      return x < C(0) ? C(slope * x) : x;
    });
  });
}

void sigmoid_kernel(KernelContext& ctx) {
  float_unary_with_span(ctx, float32_math().sigmoid, [](auto x) {
    using C = decltype(x);
    return C(1) / (C(1) + std::exp(-x));
  });
}

void hard_sigmoid_kernel(KernelContext& ctx) {
  const float alpha = attr(ctx, "alpha", 0.2f);
  const float beta = attr(ctx, "beta", 0.5f);
  float_unary(ctx, [=](auto x) {
    using C = decltype(x);
    // std::min/max would turn NaN into a bound; NaN passes through as in torch's hardsigmoid.
    return x != x ? x : std::max(C(0), std::min(C(1), C(alpha) * x + C(beta)));
  });
}

void hard_swish_kernel(KernelContext& ctx) {
  float_unary(ctx, [](auto x) {
    using C = decltype(x);
    return x * std::max(C(0), std::min(C(1), x / C(6) + C(0.5)));
  });
}

/// Clip bound from optional input i (a scalar of X's dtype; legacy float
/// attributes were turned into float32 inputs by normalisation).
template <typename C>
C clip_bound(const KernelContext& ctx, size_t i, C fallback) {
  if (!ctx.has_input(i)) return fallback;
  const TensorView& v = ctx.input(i);
  if (v.numel() != 1) ctx.fail("input ", i, " (", i == 1 ? "min" : "max", ") must be a scalar, has shape ", shape_to_string(v.shape));
  if constexpr (std::is_integral_v<C>) {
    return static_cast<C>(view_int_at(v, 0));
  } else {
    return static_cast<C>(view_double_at(v, 0));
  }
}

void clip_kernel(KernelContext& ctx) {
  dispatch_numbers(ctx.input(0).dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = Compute<T>;
    const C low = clip_bound<C>(ctx, 1, std::numeric_limits<C>::lowest());
    const C high = clip_bound<C>(ctx, 2, std::numeric_limits<C>::max());
    // max before min: when min > max every element becomes max, as ONNX specifies.
    map_unary<T, T>(ctx.pool(), ctx.input(0), ctx.output(0), [=](C x) {
      const C raised = x < low ? low : x;
      return high < raised ? high : raised;
    });
  });
}

void softplus_kernel(KernelContext& ctx) {
  // log(1 + e^x) without overflow for large x.
  float_unary(ctx, [](auto x) {
    using C = decltype(x);
    return x > C(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
  });
}

void softsign_kernel(KernelContext& ctx) {
  float_unary(ctx, [](auto x) { return x / (decltype(x)(1) + std::fabs(x)); });
}

void elu_kernel(KernelContext& ctx) {
  const float alpha = attr(ctx, "alpha", 1.0f);
  float_unary(ctx, [=](auto x) {
    using C = decltype(x);
    return x < C(0) ? C(alpha) * std::expm1(x) : x;
  });
}

void selu_kernel(KernelContext& ctx) {
  const float alpha = attr(ctx, "alpha", 1.67326319217681884765625f);
  const float gamma = attr(ctx, "gamma", 1.05070102214813232421875f);
  float_unary(ctx, [=](auto x) {
    using C = decltype(x);
    return x > C(0) ? C(gamma) * x : C(gamma) * C(alpha) * std::expm1(x);
  });
}

void celu_kernel(KernelContext& ctx) {
  const float alpha = attr(ctx, "alpha", 1.0f);
  if (alpha == 0) ctx.fail("alpha must not be 0");
  float_unary(ctx, [=](auto x) {
    using C = decltype(x);
    // NaN passes through (std::max/min would give 0), as in torch's celu.
    return x != x ? x : std::max(C(0), x) + std::min(C(0), C(alpha) * std::expm1(x / C(alpha)));
  });
}

// ThresholdedRelu and Shrink keep ONNX's explicit "otherwise 0" for NaN (as
// its numpy reference does); torch's threshold would pass NaN through.
void thresholded_relu_kernel(KernelContext& ctx) {
  const float alpha = attr(ctx, "alpha", 1.0f);
  float_unary(ctx, [=](auto x) {
    using C = decltype(x);
    return x > C(alpha) ? x : C(0);
  });
}

void shrink_kernel(KernelContext& ctx) {
  const float bias = attr(ctx, "bias", 0.0f);
  const float lambd = attr(ctx, "lambd", 0.5f);
  numeric_unary(ctx, [=](auto x) {
    using C = decltype(x);
    // Compare in double so that integer inputs see the fractional lambd.
    const double v = static_cast<double>(x);
    if (v < -lambd) return static_cast<C>(v + bias);
    if (v > lambd) return static_cast<C>(v - bias);
    return C(0);
  });
}

}  // namespace

void register_activation_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "Relu", .run = relu_kernel});
  registry.add({.op_type = "LeakyRelu", .run = leaky_relu_kernel});
  registry.add({.op_type = "PRelu", .run = prelu_kernel});
  registry.add({.op_type = "Sigmoid", .run = sigmoid_kernel});
  registry.add({.op_type = "Tanh", .run = [](KernelContext& ctx) {
                  float_unary_with_span(ctx, float32_math().tanh, [](auto x) { return std::tanh(x); });
                }});
  registry.add({.op_type = "HardSigmoid", .run = hard_sigmoid_kernel});
  registry.add({.op_type = "HardSwish", .run = hard_swish_kernel});
  registry.add({.op_type = "Clip", .run = clip_kernel});
  registry.add({.op_type = "Softplus", .run = softplus_kernel});
  registry.add({.op_type = "Softsign", .run = softsign_kernel});
  registry.add({.op_type = "Elu", .run = elu_kernel});
  registry.add({.op_type = "Selu", .run = selu_kernel});
  registry.add({.op_type = "Celu", .run = celu_kernel});
  registry.add({.op_type = "ThresholdedRelu", .run = thresholded_relu_kernel});
  registry.add({.op_type = "Shrink", .run = shrink_kernel});
}

}  // namespace tessera::native::elementwise
