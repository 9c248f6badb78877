// Native kernels of broadcasting binary ops: Add, Sub, Mul, Div, Pow, Mod,
// BitShift, And, Or, Xor and the comparisons.
#include <cmath>
#include <string>
#include <type_traits>

#include "backends/native/kernels/elementwise_internal.h"

namespace tessera::native::elementwise {
namespace {

/// y = op(a, b) where a, b and y share one numeric dtype.
template <typename Op>
void same_type_binary(KernelContext& ctx, Op op) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  if (a.dtype != b.dtype) ctx.fail("inputs have different dtypes ", dtype_name(a.dtype), " and ", dtype_name(b.dtype));
  dispatch_numbers(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    broadcast_binary<T, T, T>(ctx.pool(), a, b, ctx.output(0), op);
  });
}

/// bool y = op(a, b) for inputs of one dtype (bool included when allow_bool).
template <typename Op>
void compare_binary(KernelContext& ctx, Op op) {
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  if (a.dtype != b.dtype) ctx.fail("inputs have different dtypes ", dtype_name(a.dtype), " and ", dtype_name(b.dtype));
  dispatch_all(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    broadcast_binary<T, T, bool>(ctx.pool(), a, b, ctx.output(0), op);
  });
}

template <typename Op>
void logic_binary(KernelContext& ctx, Op op) {
  for (size_t i = 0; i < 2; ++i) {
    if (ctx.input(i).dtype != DType::kBool) ctx.fail("input ", i, " must be bool, is ", dtype_name(ctx.input(i).dtype));
  }
  broadcast_binary<bool, bool, bool>(ctx.pool(), ctx.input(0), ctx.input(1), ctx.output(0), op);
}

/// Integer division truncating toward zero (C semantics, as ONNX's tests
/// expect); division by zero gives 0 rather than trapping, and the minimum
/// divided by -1 wraps.
template <typename C>
C divide(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<C>) {
      if (b == -1) return sub_wrapping(C(0), a);
    }
    return static_cast<C>(a / b);
  } else {
    return a / b;
  }
}

/// Mod with fmod=1: the result has the sign of the dividend (C fmod).
template <typename C>
C truncated_mod(C a, C b) {
  if constexpr (std::is_integral_v<C>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<C>) {
      if (b == -1) return 0;
    }
    return static_cast<C>(a % b);
  } else {
    return std::fmod(a, b);
  }
}

/// Mod with fmod=0: the result has the sign of the divisor (Python / numpy).
template <typename C>
C floored_mod(C a, C b) {
  C r = truncated_mod(a, b);
  if constexpr (std::is_signed_v<C>) {
    if (r != C(0) && ((r < C(0)) != (b < C(0)))) r = static_cast<C>(r + b);
  }
  return r;
}

void div_kernel(KernelContext& ctx) {
  same_type_binary(ctx, [](auto a, auto b) { return divide(a, b); });
}

void mod_kernel(KernelContext& ctx) {
  if (ctx.attrs().get_int_or("fmod", 0) != 0) {
    same_type_binary(ctx, [](auto a, auto b) { return truncated_mod(a, b); });
  } else {
    same_type_binary(ctx, [](auto a, auto b) { return floored_mod(a, b); });
  }
}

/// base^exponent for integers by repeated squaring (exact for int64, unlike
/// going through double). Negative exponents give the truncated result.
template <typename C, typename E>
C integer_power(C base, E exponent) {
  if constexpr (std::is_signed_v<E>) {
    if (exponent < 0) {
      if (base == C(1)) return C(1);
      if constexpr (std::is_signed_v<C>) {
        if (base == C(-1)) return (exponent % 2) ? C(-1) : C(1);
      }
      return C(0);
    }
  }
  // Overflow wraps instead of being undefined (a uint16 product, promoted to int, could overflow too).
  C result = 1, factor = base;
  for (auto e = static_cast<uint64_t>(exponent); e; e >>= 1) {
    if (e & 1) result = mul_wrapping(result, factor);
    factor = mul_wrapping(factor, factor);
  }
  return result;
}

template <typename C, typename E>
C power(C base, E exponent) {
  if constexpr (std::is_floating_point_v<C>) {
    return static_cast<C>(std::pow(base, static_cast<C>(exponent)));
  } else if constexpr (std::is_integral_v<E>) {
    return integer_power(base, exponent);
  } else {
    // An integer base to a float power: NaN ((-2)^0.5) and results out of C's range follow Cast's rule.
    return float_to_integer<C>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  }
}

/// Pow with a scalar float exponent of 2, 3, 0.5 or 1 (x*x after LayerNorm's
/// mean subtraction is the common one) without calling pow per element.
template <typename T>
bool pow_by_scalar_fast_path(KernelContext& ctx) {
  const TensorView& exponent = ctx.input(1);
  if (exponent.numel() != 1 || ctx.output(0).shape != ctx.input(0).shape) return false;
  const double e = view_double_at(exponent, 0);
  using C = Compute<T>;
  if (e == 2) {
    map_unary<T, T>(ctx.pool(), ctx.input(0), ctx.output(0), [](C x) { return x * x; });
  } else if (e == 3) {
    map_unary<T, T>(ctx.pool(), ctx.input(0), ctx.output(0), [](C x) { return x * x * x; });
  } else if (e == 0.5) {
    map_unary<T, T>(ctx.pool(), ctx.input(0), ctx.output(0), [](C x) { return std::sqrt(x); });
  } else if (e == 1) {
    map_unary<T, T>(ctx.pool(), ctx.input(0), ctx.output(0), [](C x) { return x; });
  } else {
    return false;
  }
  return true;
}

void pow_kernel(KernelContext& ctx) {
  const TensorView& base = ctx.input(0);
  const TensorView& exponent = ctx.input(1);
  dispatch_numbers(base.dtype, [&](auto base_tag) {
    using T = decltype(base_tag);
    if constexpr (kIsFloat<T>) {
      if (pow_by_scalar_fast_path<T>(ctx)) return;
    }
    dispatch_numbers(exponent.dtype, [&](auto exponent_tag) {
      using E = decltype(exponent_tag);
      broadcast_binary<T, E, T>(ctx.pool(), base, exponent, ctx.output(0), [](auto a, auto b) { return power(a, b); });
    });
  });
}

void bitshift_kernel(KernelContext& ctx) {
  const std::string direction = ctx.attrs().get_string_or("direction", "");
  const bool left = direction == "LEFT";
  if (!left && direction != "RIGHT") ctx.fail("direction must be LEFT or RIGHT, got '", direction, "'");
  const TensorView& a = ctx.input(0);
  if (dtype_is_signed(a.dtype)) throw_unsupported(ctx.node().describe(), ": BitShift needs unsigned integers, got ", dtype_name(a.dtype));
  if (a.dtype != ctx.input(1).dtype) ctx.fail("inputs have different dtypes ", dtype_name(a.dtype), " and ", dtype_name(ctx.input(1).dtype));
  dispatch_integer(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    constexpr uint64_t bits = sizeof(T) * 8;
    // Shifting by the width or more is undefined in C++; every bit is shifted out.
    broadcast_binary<T, T, T>(ctx.pool(), a, ctx.input(1), ctx.output(0), [left](T x, T s) {
      if (static_cast<uint64_t>(s) >= bits) return T(0);
      return left ? static_cast<T>(x << s) : static_cast<T>(x >> s);
    });
  });
}

}  // namespace

void register_binary_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "Add", .run = [](KernelContext& ctx) { same_type_binary(ctx, [](auto a, auto b) { return add_wrapping(a, b); }); }});
  registry.add({.op_type = "Sub", .run = [](KernelContext& ctx) { same_type_binary(ctx, [](auto a, auto b) { return sub_wrapping(a, b); }); }});
  registry.add({.op_type = "Mul", .run = [](KernelContext& ctx) { same_type_binary(ctx, [](auto a, auto b) { return mul_wrapping(a, b); }); }});
  registry.add({.op_type = "Div", .run = div_kernel});
  registry.add({.op_type = "Mod", .run = mod_kernel});
  registry.add({.op_type = "Pow", .run = pow_kernel});
  registry.add({.op_type = "BitShift", .run = bitshift_kernel});
  registry.add({.op_type = "And", .run = [](KernelContext& ctx) { logic_binary(ctx, [](bool a, bool b) { return a && b; }); }});
  registry.add({.op_type = "Or", .run = [](KernelContext& ctx) { logic_binary(ctx, [](bool a, bool b) { return a || b; }); }});
  registry.add({.op_type = "Xor", .run = [](KernelContext& ctx) { logic_binary(ctx, [](bool a, bool b) { return a != b; }); }});
  registry.add({.op_type = "Equal", .run = [](KernelContext& ctx) { compare_binary(ctx, [](auto a, auto b) { return a == b; }); }});
  registry.add({.op_type = "Less", .run = [](KernelContext& ctx) { compare_binary(ctx, [](auto a, auto b) { return a < b; }); }});
  registry.add({.op_type = "LessOrEqual", .run = [](KernelContext& ctx) { compare_binary(ctx, [](auto a, auto b) { return a <= b; }); }});
  registry.add({.op_type = "Greater", .run = [](KernelContext& ctx) { compare_binary(ctx, [](auto a, auto b) { return a > b; }); }});
  registry.add({.op_type = "GreaterOrEqual", .run = [](KernelContext& ctx) { compare_binary(ctx, [](auto a, auto b) { return a >= b; }); }});
}

}  // namespace tessera::native::elementwise
