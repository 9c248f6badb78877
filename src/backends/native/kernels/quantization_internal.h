// Internal to the native quantization kernels: the rounding and saturation
// rules of the ONNX spec, the int32-accumulating integer GEMM shared by
// MatMulInteger / QLinearMatMul / ConvInteger / QLinearConv, the plain
// reference implementations the tests compare against, and the per-group
// registration functions called from register_quantization_kernels.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "backends/native/kernel.h"
#include "backends/native/thread_pool.h"

namespace tessera::native {

// ------------------------------------------------------------ rounding ----

/// saturate(v) into Q's range; v is already integral (or NaN, which goes to
/// Q's lowest value: the spec leaves it undefined, and this never traps).
// (Always inlined: the quantize spans below are built once per ISA, and an
// out-of-line copy of these templates shared between those files could run
// one ISA's code on a CPU without it.)
template <typename Q, typename F>
[[gnu::always_inline]] inline Q saturate_to(F v) {
  static_assert(sizeof(Q) <= 2, "the bounds must be exact in F");
  constexpr F lo = static_cast<F>(std::numeric_limits<Q>::lowest());
  constexpr F hi = static_cast<F>(std::numeric_limits<Q>::max());
  // Strict comparisons: the same values (v == lo gives lo either way; -0 casts to 0), and the
  // very rule of maxps / minps (the second operand when either is NaN), so a vectorised loop
  // needs one instruction a bound instead of a compare and a blend.
  v = v > lo ? v : lo;
  v = v < hi ? v : hi;
  return static_cast<Q>(v);
}

/// saturate(round_half_to_even(v) + zero_point), branch-free and without a
/// libm call (std::nearbyint was one per element) so the loops over it
/// vectorise: v is first clamped to one step beyond what saturates (NaN to the
/// low end, as saturate_to does), which keeps it far below 2^22, where adding
/// and subtracting 1.5 * 2^23 (1.5 * 2^52 for double) rounds ties to even for
/// either sign. (Compiled without -ffast-math, which would fold the pair away.)
template <typename Q, typename F>
[[gnu::always_inline]] inline Q quantize_value(F v, int32_t zero_point) {
  constexpr F kMagic = sizeof(F) == 4 ? F(12582912.0) : F(6755399441055744.0);
  const F z = static_cast<F>(zero_point);
  const F lo = static_cast<F>(std::numeric_limits<Q>::lowest()) - z - 1;
  const F hi = static_cast<F>(std::numeric_limits<Q>::max()) - z + 1;
  v = v > lo ? v : lo;  // strict, as in saturate_to (lo and hi are never 0)
  v = v < hi ? v : hi;
  return saturate_to<Q>((v + kMagic) - kMagic + z);
}

/// Requantizes an int32 accumulator: saturate(round(acc * multiplier) + zero_point).
/// The product is in double, as ONNX's reference computes (an int32 array
/// times a float32 scale promotes to float64 in numpy).
template <typename Q>
Q requantize(int32_t acc, double multiplier, int32_t zero_point) {
  return quantize_value<Q>(static_cast<double>(acc) * multiplier, zero_point);
}

/// y[i] = quantize_value(x[i] / scale, zero_point) for float32 x, the loop of
/// QuantizeLinear and DynamicQuantizeLinear, and the latter's range: built for each ISA
/// (quantization_span_body.h; the baseline build vectorises 4 lanes, AVX2 8,
/// AVX-512 16) and chosen from CPU features by quantize_spans (the one dispatch point).
struct QuantizeSpans {
  void (*to_uint8)(const float* x, int64_t n, float scale, int32_t zero_point, uint8_t* y);
  void (*to_int8)(const float* x, int64_t n, float scale, int32_t zero_point, int8_t* y);
  /// *lo = min(0, x...), *hi = max(0, x...), NaN skipped (DynamicQuantizeLinear's range).
  void (*range)(const float* x, int64_t n, float* lo, float* hi);
};
QuantizeSpans quantize_spans_portable();
QuantizeSpans quantize_spans_avx2();
QuantizeSpans quantize_spans_avx512();
const QuantizeSpans& quantize_spans();

// ---------------------------------------------------------------- GEMM ----

/// The integer GEMM: C[m x n] (row stride ldc) = A[m x k] * B[k x n] over
/// int16 operands holding zero-point-adjusted 8-bit values (in [-255, 255]),
/// with int32 accumulation (exact while k * 2 * 255 * 255 < 2^31, i.e. k < 16513;
/// callers check integer_gemm_depth_ok). B is packed once (pack_integer_b) and
/// then serves any rows of A: panels of kIntegerGemmPanel columns, rows of B in
/// pairs (K padded to even with zeros), the two values of a pair side by side per
/// column, the layout pmaddwd multiplies against a broadcast pair of A.
constexpr int64_t kIntegerGemmPanel = 16;
/// int16 elements from one packed panel to the next: K rounded up to even, times the panel's width.
inline int64_t integer_panel_stride(int64_t k) { return ((k + 1) / 2) * 2 * kIntegerGemmPanel; }
int64_t packed_integer_b_size(int64_t k, int64_t n);
void pack_integer_b(int64_t k, int64_t n, const int16_t* b, int64_t ldb, int16_t* packed);
inline bool integer_gemm_depth_ok(int64_t k) { return k < 16513; }

/// C = A (row stride lda) * packed B, in tiles of C spread over `pool`'s threads.
void integer_gemm_packed(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda, const int16_t* packed_b, int32_t* c,
                         int64_t ldc, const ThreadPool& pool);

/// Serial and unpacked (B dense row-major): packs B, then runs the widest ISA build.
void integer_gemm(int64_t m, int64_t n, int64_t k, const int16_t* a, const int16_t* b, int32_t* c, int64_t ldc);

/// The microkernel built for each ISA (quantization_gemm_*.cc): C[m x n] from
/// the packed panel of C's first column (n may stop short of B's width), serial.
/// integer_gemm_packed picks the widest this CPU runs (the one dispatch point).
using IntegerGemmTilesFn = void (*)(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda, const int16_t* packed_b,
                                    int32_t* c, int64_t ldc);
void integer_gemm_tiles_portable(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda, const int16_t* packed_b,
                                 int32_t* c, int64_t ldc);
void integer_gemm_tiles_avx2(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda, const int16_t* packed_b,
                             int32_t* c, int64_t ldc);
void integer_gemm_tiles_avx512(int64_t m, int64_t n, int64_t k, const int16_t* a, int64_t lda, const int16_t* packed_b,
                               int32_t* c, int64_t ldc);
/// The widest ISA build of the microkernel this CPU runs (the one dispatch point).
IntegerGemmTilesFn integer_gemm_tiles_for_cpu();

// ------------------------------------------- u8 x s8 GEMM (AVX512_VNNI) ----
// On CPUs with AVX512_VNNI, MatMulInteger and QLinearMatMul multiply the 8-bit
// values themselves instead of widened int16 pairs: vpdpbusd adds four
// uint8 x int8 products to each int32 lane, twice the products of pmaddwd per
// instruction and no widening pass. A enters as uint8 (int8 A is shifted by
// +128), B as int8 (uint8 B by -128), with the shifts folded into the zero
// points, which are applied after the products:
//   sum_k (a - za)(b - zb) = sum_k a b - zb (sum_k a - k za) - za sum_k b.
// Every term is computed modulo 2^32, so the result is exact wherever it fits
// int32, as the int16 path's is (callers check integer_gemm_depth_ok).
constexpr int64_t kQuadGemmPanel = 16;
/// Bytes from one packed panel to the next: K rounded up to a multiple of 4, times the panel's width.
inline int64_t quad_panel_stride(int64_t k) { return ((k + 3) / 4) * 4 * kQuadGemmPanel; }

/// B [k x n] packed for the u8 x s8 GEMM: panels of 16 columns, K in quads
/// (zero-padded), each quad's four values of a column side by side; with the
/// sum over K of each column (shifted values) and each column's shifted zero point.
struct QuadPackedB {
  int64_t k = 0, n = 0;
  std::vector<int8_t> data;
  std::vector<int32_t> column_sums, column_zero_points;
};
/// Packs a dense k x n matrix of shifted values (row stride ldb) into quad
/// panels (quad_panel_stride(k) bytes each, K zero-padded), adding each
/// column's sum over K into column_sums[j] (n values, the caller initialises).
void pack_quad_panels(int64_t k, int64_t n, const int8_t* b, int64_t ldb, int8_t* packed, int32_t* column_sums);
/// Packs one k x n matrix of `b` (int8 or uint8) starting at element `offset`;
/// `zero_point` per tensor, per column, or null.
void pack_quad_b(const TensorView& b, const TensorView* zero_point, int64_t k, int64_t n, int64_t offset, QuadPackedB& out);

/// A [m x k] as the u8 x s8 GEMM reads it: uint8 rows (row stride lda), each
/// row's shifted zero point and its term sum_k a - k za.
struct QuadA {
  const uint8_t* data = nullptr;
  int64_t lda = 0;
  std::vector<int32_t> row_zero_points, row_terms;
};
/// Makes the QuadA of `a` (m x k, int8 or uint8; int8 copied shifted into
/// `shifted`, m * k bytes) with zero points per tensor, per row, or none.
void quad_a(const TensorView& a, int64_t m, int64_t k, int64_t offset, const TensorView* zero_point, uint8_t* shifted,
            QuadA& out);

/// Whether this CPU runs the u8 x s8 GEMM (AVX512_VNNI, and TESSERA_ISA allows it).
bool quad_gemm_available();
/// C [m x n] (row stride ldc) = (A - za)(B - zb), in tiles spread over `pool`'s threads.
void quad_gemm_packed(int64_t m, const QuadA& a, const QuadPackedB& b, int32_t* c, int64_t ldc, const ThreadPool& pool);

/// What one call of the microkernel reads (quantization_gemm_avx512vnni.cc).
struct QuadTileArgs {
  int64_t k = 0;
  const uint8_t* a = nullptr;
  int64_t lda = 0;
  const int32_t* row_zero_points = nullptr;
  const int32_t* row_terms = nullptr;
  const int8_t* packed_b = nullptr;
  int64_t panel_stride = 0;
  const int32_t* column_sums = nullptr;
  const int32_t* column_zero_points = nullptr;
  int32_t* c = nullptr;
  int64_t ldc = 0;
};
/// Rows [i_begin, i_end) x columns [j_begin, j_end) of C, serial; j_begin a multiple of 16.
void quad_gemm_tiles_avx512vnni(const QuadTileArgs& t, int64_t i_begin, int64_t i_end, int64_t j_begin, int64_t j_end);

/// A constant 8-bit weight (input w_index of `node`) whose zero point (input
/// zero_point_index) is constant or absent: what the integer kernels' prepare
/// hooks widen (and pack) at compile time. nullopt otherwise (a zero point
/// known only at run time, a non-constant or non-8-bit weight).
struct ConstantIntegerWeight {
  const Tensor* weight = nullptr;
  std::optional<TensorView> zero_point;
  const TensorView* zero_point_or_null() const { return zero_point ? &*zero_point : nullptr; }
};
std::optional<ConstantIntegerWeight> constant_integer_weight(const Node& node, const std::vector<const Tensor*>& constants,
                                                             size_t w_index, size_t zero_point_index);

/// Per-thread memory reused from call to call: the integer kernels' widened
/// operands, im2col matrices, packed panels and accumulators are megabytes, and
/// a fresh vector each call costs more in page faults than the arithmetic.
/// Each use site has its own slot, so uses nested in one call never share; the
/// memory is uninitialised and stays with the thread (the largest size seen).
enum class ScratchSlot { kA, kB, kPacked, kColumns, kAccumulators, kTaskPacked, kTaskColumns, kTaskAccumulators, kCount };
void* scratch_bytes(ScratchSlot slot, size_t bytes);
template <typename T>
T* scratch(ScratchSlot slot, int64_t count) {
  return static_cast<T*>(scratch_bytes(slot, static_cast<size_t>(count) * sizeof(T)));
}

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
