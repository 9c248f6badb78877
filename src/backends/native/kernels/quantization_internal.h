// Internal to the native quantization kernels: the rounding and saturation
// rules of the ONNX spec, the int32-accumulating integer GEMM shared by
// MatMulInteger / QLinearMatMul / ConvInteger / QLinearConv, the plain
// reference implementations the tests compare against, and the per-group
// registration functions called from register_quantization_kernels.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/native/kernel.h"

namespace tessera::native {

// ------------------------------------------------------------ rounding ----

/// saturate(v) into Q's range; v is already integral (or NaN, which goes to
/// Q's lowest value: the spec leaves it undefined, and this never traps).
template <typename Q, typename F>
Q saturate_to(F v) {
  static_assert(sizeof(Q) <= 2, "the bounds must be exact in F");
  constexpr F lo = static_cast<F>(std::numeric_limits<Q>::lowest());
  constexpr F hi = static_cast<F>(std::numeric_limits<Q>::max());
  v = v >= lo ? v : lo;
  v = v <= hi ? v : hi;
  return static_cast<Q>(v);
}

/// saturate(round_half_to_even(v) + zero_point). std::nearbyint rounds half
/// to even in the default floating-point environment.
template <typename Q, typename F>
Q quantize_value(F v, int32_t zero_point) {
  return saturate_to<Q>(std::nearbyint(v) + static_cast<F>(zero_point));
}

/// Requantizes an int32 accumulator: saturate(round(acc * multiplier) + zero_point).
/// The product is in double, as ONNX's reference computes (an int32 array
/// times a float32 scale promotes to float64 in numpy).
template <typename Q>
Q requantize(int32_t acc, double multiplier, int32_t zero_point) {
  return quantize_value<Q>(static_cast<double>(acc) * multiplier, zero_point);
}

// ---------------------------------------------------------------- GEMM ----

/// C[m x n] (row stride ldc) = A[m x k] * B[k x n], both dense row-major
/// int16 holding zero-point-adjusted 8-bit values (in [-255, 255]), with
/// int32 accumulation (exact while k * 255 * 255 < 2^31, i.e. k < 33025).
/// Serial and pure; callers split rows across threads.
void integer_gemm(int64_t m, int64_t n, int64_t k, const int16_t* a, const int16_t* b, int32_t* c, int64_t ldc);

/// The same GEMM built for each ISA (quantization_gemm_*.cc); integer_gemm
/// picks the widest this CPU runs. Exposed so the tests can check each one.
void integer_gemm_portable(int64_t m, int64_t n, int64_t k, const int16_t* a, const int16_t* b, int32_t* c, int64_t ldc);
void integer_gemm_avx2(int64_t m, int64_t n, int64_t k, const int16_t* a, const int16_t* b, int32_t* c, int64_t ldc);
void integer_gemm_avx512(int64_t m, int64_t n, int64_t k, const int16_t* a, const int16_t* b, int32_t* c, int64_t ldc);

/// Rows per integer_gemm call that callers should hand one task (the GEMM's row block).
constexpr int64_t kIntegerGemmRows = 4;

/// dst[i] = src[i] - zero_point(i) widened to int16, for 8-bit src. The zero
/// point of element i is zero_points[(i / zero_point_stride) % zero_point_count]
/// (count 1: per tensor; stride 1: per column; stride = row length: per row).
void subtract_zero_point(const TensorView& src, const TensorView* zero_point, int64_t zero_point_stride, int16_t* dst);

/// The value of a scalar or one-element tensor as int32 (0 when absent).
int32_t scalar_zero_point(const TensorView* zero_point);

// ---------------------------------------------------------- references ----
// Straight loops over the spec's formulas. Scale / zero-point tensors are
// scalars (one element) or 1-D per-axis / per-row / per-column tensors.

/// QuantizeLinear (x float32 or int32; zero_point may be null: uint8 0).
Tensor reference_quantize_linear(const Tensor& x, const Tensor& scale, const Tensor* zero_point, int64_t axis);
/// DequantizeLinear (x int8, uint8 or int32).
Tensor reference_dequantize_linear(const Tensor& x, const Tensor& scale, const Tensor* zero_point, int64_t axis);
/// DynamicQuantizeLinear's three outputs: y, y_scale, y_zero_point.
std::vector<Tensor> reference_dynamic_quantize_linear(const Tensor& x);
/// MatMulInteger with numpy matmul broadcasting; zero points per tensor, per row of A, per column of B.
Tensor reference_matmul_integer(const Tensor& a, const Tensor& b, const Tensor* a_zero_point, const Tensor* b_zero_point);
Tensor reference_qlinear_matmul(const Tensor& a, const Tensor& a_scale, const Tensor& a_zero_point, const Tensor& b,
                                const Tensor& b_scale, const Tensor& b_zero_point, const Tensor& y_scale,
                                const Tensor& y_zero_point);

/// Explicit convolution geometry for the references (what Conv's attributes resolve to).
struct ReferenceConvGeometry {
  int64_t group = 1;
  std::vector<int64_t> stride, dilation, pad_begin, pad_end;
};
/// ConvInteger: x zero point per tensor, w zero point per tensor or per output channel.
Tensor reference_conv_integer(const Tensor& x, const Tensor& w, const Tensor* x_zero_point, const Tensor* w_zero_point,
                              const ReferenceConvGeometry& geometry);
Tensor reference_qlinear_conv(const Tensor& x, const Tensor& x_scale, const Tensor& x_zero_point, const Tensor& w,
                              const Tensor& w_scale, const Tensor& w_zero_point, const Tensor& y_scale,
                              const Tensor& y_zero_point, const Tensor* bias, const ReferenceConvGeometry& geometry);

// -------------------------------------------------------- registration ----

void register_quantization_linear_kernels(KernelRegistry& registry);  // quantization.cc
void register_quantization_matmul_kernels(KernelRegistry& registry);  // quantization_matmul.cc
void register_quantization_conv_kernels(KernelRegistry& registry);    // quantization_conv.cc

}  // namespace tessera::native
