// Dtype dispatch for kernels: calls fn with a value of the C++ element type.
//   dispatch_float(dtype, [&](auto tag) { using T = decltype(tag); ... });
// float16 is handled by kernels that convert through float; see each kernel.
#pragma once
#include <cstdint>
#include <utility>

#include "ir/dtype.h"
#include "ir/error.h"

namespace tessera::native {

template <typename Fn>
decltype(auto) dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat64: return fn(double{});
    default: throw_unsupported("dtype ", dtype_name(dtype), " is not supported here (float32, float64 are)");
  }
}

/// Every signed and unsigned integer dtype (not bool).
template <typename Fn>
decltype(auto) dispatch_integer(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kInt8: return fn(int8_t{});
    case DType::kInt16: return fn(int16_t{});
    case DType::kInt32: return fn(int32_t{});
    case DType::kInt64: return fn(int64_t{});
    case DType::kUInt8: return fn(uint8_t{});
    case DType::kUInt16: return fn(uint16_t{});
    case DType::kUInt32: return fn(uint32_t{});
    case DType::kUInt64: return fn(uint64_t{});
    default: throw_unsupported("dtype ", dtype_name(dtype), " is not supported here (integer types are)");
  }
}

/// float32, float64 and every integer dtype.
template <typename Fn>
decltype(auto) dispatch_numeric(DType dtype, Fn&& fn) {
  if (dtype == DType::kFloat32 || dtype == DType::kFloat64) return dispatch_float(dtype, std::forward<Fn>(fn));
  if (!dtype_is_integer(dtype)) throw_unsupported("dtype ", dtype_name(dtype), " is not supported here");
  return dispatch_integer(dtype, std::forward<Fn>(fn));
}

/// Any dtype by element size only (for ops that move bytes: Transpose, Gather, Concat...).
template <typename Fn>
decltype(auto) dispatch_by_size(DType dtype, Fn&& fn) {
  switch (dtype_size(dtype)) {
    case 1: return fn(uint8_t{});
    case 2: return fn(uint16_t{});
    case 4: return fn(uint32_t{});
    case 8: return fn(uint64_t{});
    default: throw_unsupported("dtype ", dtype_name(dtype), " is not supported here");
  }
}

}  // namespace tessera::native
