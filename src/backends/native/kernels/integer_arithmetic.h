// Integer arithmetic without undefined behaviour, for kernels that compute in
// their element type: +, - and * that wrap around on overflow (two's
// complement, what numpy and ONNX Runtime give) where C++ leaves signed
// overflow undefined, and a real value's conversion into an integer type that
// saturates (NaN gives 0) where a plain cast of an out-of-range value is
// undefined. Floating types pass through the plain operations unchanged.
#pragma once
#include <cmath>
#include <limits>
#include <type_traits>

namespace tessera::native {

/// The unsigned type T's wrapping arithmetic runs in: at least unsigned int, so that narrow types,
/// which promote to (signed) int, cannot overflow in the product either.
template <typename T>
using WrappingUnsigned = std::common_type_t<std::make_unsigned_t<T>, unsigned>;

template <typename T>
inline constexpr bool kWrapsAround = std::is_integral_v<T> && !std::is_same_v<T, bool>;

template <typename T>
inline T add_wrapping(T a, T b) {
  if constexpr (kWrapsAround<T>) {
    using U = WrappingUnsigned<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  } else {
    return a + b;
  }
}

template <typename T>
inline T sub_wrapping(T a, T b) {
  if constexpr (kWrapsAround<T>) {
    using U = WrappingUnsigned<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) - static_cast<U>(b)));
  } else {
    return a - b;
  }
}

template <typename T>
inline T mul_wrapping(T a, T b) {
  if constexpr (kWrapsAround<T>) {
    using U = WrappingUnsigned<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  } else {
    return a * b;
  }
}

/// Float to integer without undefined behaviour: NaN gives 0 and out-of-range
/// values (infinities included) saturate (ONNX leaves these cases undefined).
template <typename Out, typename In>
inline Out float_to_integer(In v) {
  static_assert(std::is_integral_v<Out> && std::is_floating_point_v<In>);
  if (std::isnan(v)) return Out(0);
  if (v <= static_cast<In>(std::numeric_limits<Out>::lowest())) return std::numeric_limits<Out>::lowest();
  if (v >= static_cast<In>(std::numeric_limits<Out>::max())) return std::numeric_limits<Out>::max();
  return static_cast<Out>(v);
}

/// A real value v as element type T: float_to_integer for integer T, a plain conversion otherwise.
template <typename T, typename In>
inline T real_to(In v) {
  if constexpr (kWrapsAround<T> && std::is_floating_point_v<In>) {
    return float_to_integer<T>(v);
  } else {
    return static_cast<T>(v);
  }
}

}  // namespace tessera::native
