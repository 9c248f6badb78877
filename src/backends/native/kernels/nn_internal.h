// Internal to the native nn kernels: the single-precision GEMM (microkernels
// per ISA, packing, the parallel driver), reference implementations used by
// the tests, and the per-group registration functions called from
// register_nn_kernels (kernels/nn.cc).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "backends/native/kernel.h"
#include "backends/native/kernels/integer_arithmetic.h"

namespace tessera::native {

// ----------------------------------------------------------- depthwise ----

/// One 2-D plane of a depthwise convolution (channel multiplier 1):
/// y[oh][ow] = bias + sum over (kh, kw) of w[kh][kw] * x[ih][iw], taps outside
/// the input skipped (zero padding).
struct DepthwisePlane {
  const float* x = nullptr;
  int64_t in_h = 0, in_w = 0;
  const float* w = nullptr;
  int64_t kernel_h = 0, kernel_w = 0;
  int64_t stride_h = 1, stride_w = 1, pad_top = 0, pad_left = 0, dilation_h = 1, dilation_w = 1;
  float bias = 0;
  float* y = nullptr;
  int64_t out_h = 0, out_w = 0;
  float clamp_lo = -std::numeric_limits<float>::infinity();  // a fused Relu or Clip; NaN passes through
  float clamp_hi = std::numeric_limits<float>::infinity();
};
using DepthwisePlaneFn = void (*)(const DepthwisePlane& plane);
/// Plain loops, one output at a time (nn_conv.cc).
void depthwise_plane_portable(const DepthwisePlane& plane);
/// 16 outputs a vector, every tap accumulated in a register (nn_depthwise_avx512.cc).
void depthwise_plane_avx512(const DepthwisePlane& plane);
/// The fastest of those for this CPU (chosen from cpu_features()).
DepthwisePlaneFn best_depthwise_plane();

// ---------------------------------------------------------------- GEMM ----

/// A clamp applied to C as the last step of a GEMM (a Relu or Clip fused into
/// the producing Conv by the native ConvActivation pattern).
struct GemmClamp {
  float lo;
  float hi;
};

/// A register-blocked microkernel computing one MR x NR tile of C from A and
/// a B panel (k rows of NR floats: b[p*NR + j] = B(p, j)). A is a packed panel
/// (k rows of MR floats: a[p*MR + i] = A(i, p)) when a_row_stride is 0, else
/// MR full rows read in place: A(i, p) = a[i*a_row_stride + p] (the driver
/// uses this for row-major A, saving the packing pass; every one of the MR
/// rows must exist, even when m < MR). Writes rows < m and columns < n of the
/// tile at c (row stride ldc): c = acc (+ c when accumulate) (+ row_bias[i]
/// when row_bias is non-null), then clamped to [clamp->lo, clamp->hi] when
/// clamp is non-null. Pure: no allocation, no globals.
///
/// run_offset_b (optional; null when the ISA has none) is the same tile with
/// A packed and B read in place row by row: B(p, j) = b[b_offsets[p] + j].
/// Each row must be readable for NR floats from b + b_offsets[p] (columns
/// past n are read and ignored). The implicit-im2col convolution uses it: the
/// rows of its B are shifted windows of one padded image.
struct GemmMicrokernel {
  const char* name;
  int mr;
  int nr;
  void (*run)(int64_t k, const float* a, int64_t a_row_stride, const float* b, float* c, int64_t ldc, int64_t m,
              int64_t n, bool accumulate, const float* row_bias, const GemmClamp* clamp);
  void (*run_offset_b)(int64_t k, const float* a, const float* b, const int64_t* b_offsets, float* c, int64_t ldc,
                       int64_t m, int64_t n, bool accumulate, const float* row_bias,
                       const GemmClamp* clamp) = nullptr;
  /// One row against `count` consecutive NR-column panels of one K-block of
  /// packed B (nn_gemv_body.h's gemv_row_block): gemm_f32's path for M = 1.
  void (*run_row)(int64_t kc, const float* x, int64_t x_stride, const float* panels, int64_t count, float* partial,
                  bool first) = nullptr;
  /// run for a B read from memory once (few rows against constant weights): the same tile, with B
  /// also prefetched far ahead into L2 (nullptr: run).
  void (*run_stream)(int64_t k, const float* a, int64_t a_row_stride, const float* b, float* c, int64_t ldc, int64_t m,
                     int64_t n, bool accumulate, const float* row_bias, const GemmClamp* clamp) = nullptr;
  /// 1 to kGemmRowsMax rows of A (row-major, a[r * lda + p]) against B read in place (row-major,
  /// b[p * ldb + j]) into c (nn_gemm_rows_body.h's contract): gemm_f32's path for few rows against an
  /// unpacked B.
  void (*run_rows)(int64_t k, const float* a, int64_t lda, int rows, const float* b, int64_t ldb, float* c, int64_t ldc,
                   int64_t n, bool accumulate) = nullptr;
};
/// The most rows GemmMicrokernel::run_rows takes.
constexpr int64_t kGemmRowsMax = 4;

// One per ISA file (nn_gemm_avx512.cc, nn_gemm_avx2.cc, nn_gemm.cc).
const GemmMicrokernel& gemm_microkernel_avx512();
const GemmMicrokernel& gemm_microkernel_avx2();
const GemmMicrokernel& gemm_microkernel_portable();
/// The microkernels this CPU can run, fastest first. The one dispatch place.
std::vector<const GemmMicrokernel*> available_gemm_microkernels();
/// The fastest of those (chosen once from CPU features).
const GemmMicrokernel& best_gemm_microkernel();

/// K-block size of the packed layouts.
constexpr int64_t kGemmBlockK = 256;

/// A strided float matrix: element (r, c) at data[r * row_stride + c * col_stride].
struct MatrixRef {
  const float* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 1;
};

/// An operand packed for one microkernel. A (rows x depth) is stored per
/// K-block as MR-row panels; B (depth x cols) per K-block as NR-column panels;
/// panels are zero-padded. Block kb starts at kb * kGemmBlockK * padded_width.
/// std::allocator whose value-less construct leaves the element uninitialised: resize() of a buffer that
/// is written in full afterwards (packed weights: every element, padding included) touches it once. Its
/// memory comes from allocate_aligned (64-byte aligned, huge pages when large).
template <typename T>
struct UninitializedAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = UninitializedAllocator<U>;
  };
  UninitializedAllocator() = default;
  template <typename U>
  UninitializedAllocator(const UninitializedAllocator<U>&) noexcept {}  // NOLINT: allocator conversion
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  T* allocate(size_t n) { return static_cast<T*>(allocate_aligned(n * sizeof(T))); }  // (huge pages when large)
  void deallocate(T* p, size_t) noexcept { std::free(p); }
};

struct PackedMatrix {
  const GemmMicrokernel* kernel = nullptr;
  int64_t width = 0;   // M for A, N for B
  int64_t depth = 0;   // K
  int64_t padded_width = 0;
  std::vector<float, UninitializedAllocator<float>> data;  // written in full by pack_gemm_a / pack_gemm_b
  /// Set where the values live in storage owned elsewhere instead of `data` (WinogradWeights: 36 matrices
  /// in one buffer); every reader goes through values().
  const float* shared = nullptr;
  const float* values() const { return shared ? shared : data.data(); }
};

PackedMatrix pack_gemm_a(const GemmMicrokernel& kernel, MatrixRef a, int64_t m, int64_t k);
PackedMatrix pack_gemm_b(const GemmMicrokernel& kernel, MatrixRef b, int64_t k, int64_t n);

/// Packs rows [k0, k0+kc) x columns [n0, n0+nc) of B into NR-column panels
/// (each kc x NR, zero-padded past nc) at dst.
using PackBFn = std::function<void(int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float* dst)>;

struct GemmA {
  const PackedMatrix* packed = nullptr;  // used when set
  MatrixRef ref;
};
struct GemmB {
  const PackedMatrix* packed = nullptr;  // used first when set
  PackBFn pack;                          // then this when set
  MatrixRef ref;                         // else this
};

/// The clamp a fused Relu or Clip left on a Conv or MatMul (attribute
/// tessera_clamp of the native ConvActivation and MatMulBias composites), if any.
std::optional<GemmClamp> fused_clamp(const KernelContext& ctx);

/// C[M x N] (row stride ldc) = A * B (+ C when accumulate) (+ row_bias[i]),
/// then clamped when clamp is given, parallelised over output tiles. Packed
/// operands must come from `kernel`.
void gemm_f32(const GemmMicrokernel& kernel, int64_t m, int64_t n, int64_t k, const GemmA& a, const GemmB& b,
              float* c, int64_t ldc, bool accumulate, const float* row_bias, ThreadPool* pool,
              const GemmClamp* clamp = nullptr);

// ------------------------------------------------------------ Winograd ----

/// A float32 3x3 convolution of stride 1, dilation 1 and one group on plain NCHW, for winograd_conv.
struct WinogradConv {
  int64_t batch = 0, in_channels = 0, out_channels = 0;
  int64_t in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};
/// Fewest input and output channels, and tiles (4x4 outputs, all images together), for which
/// winograd_conv_worthwhile says yes; and at least one tile per this many filters (input x output
/// channels, kWinogradWeightsPerTile in winograd_f4x3.h): 32 tiles for 256 x 256 channels, 128 for 512 x 512.
constexpr int64_t kWinogradMinChannels = 16;
constexpr int64_t kWinogradMinTiles = 32;
/// Whether winograd_conv should run this convolution rather than the direct one: its geometry is
/// consistent, and enough channels and tiles that the saved multiplies outweigh the transforms.
bool winograd_conv_worthwhile(const WinogradConv& s);
/// The transformed weights U = G g G^T of W (out x in x 3 x 3): one packed GEMM A operand (out x in) per
/// each of the 36 points, all in one buffer (large enough for huge pages: as 36 buffers of a 256 x 256
/// convolution's 256 KB, a ResNet's first run took a page fault per 4 KB of them).
struct WinogradWeights {
  std::vector<float, UninitializedAllocator<float>> storage;
  std::vector<PackedMatrix> points;  // each PackedMatrix::shared into storage
};
WinogradWeights winograd_weights(const GemmMicrokernel& kernel, const float* w, int64_t out_channels,
                                 int64_t in_channels);
/// Y = conv(X, W) + bias, clamped when clamp is given, by Winograd F(4x4, 3x3) with U from
/// winograd_weights(kernel, W). False, with Y partly written, where X holds an Inf or NaN: the transforms
/// would spread it to outputs whose window does not read it, so the caller runs the direct convolution.
bool winograd_conv(const WinogradConv& s, const GemmMicrokernel& kernel, const WinogradWeights& u, const float* x,
                   const float* bias, float* y, ThreadPool& pool, const GemmClamp* clamp);
/// A convolution's 4x4 output tiles: th down and tw across each image; tile row n * th + i is row i of image n.
struct WinogradTiles {
  WinogradConv conv;
  int64_t th = 0, tw = 0;
};
// winograd_conv's transforms (nn_conv_winograd_body.h), one copy per ISA, over the chunk of tile rows
// [row0, row0 + rows), whose rows * (tw + 1) columns hold tile j of row r at (r - row0) * (tw + 1) + j (the
// last of each row a dummy). Input: V[point][c][column] of channel c, false (V unfinished) where an input
// value it reads is Inf or NaN. Output: the outputs of channel o from M[point][o][column], plus bias[o],
// clamped.
#define TESSERA_DECLARE_WINOGRAD(isa)                                                                          \
  namespace isa {                                                                                             \
  bool winograd_input(const WinogradTiles& g, const float* x, int64_t c, int64_t row0, int64_t rows, float* v);  \
  void winograd_output(const WinogradTiles& g, const float* m, int64_t o, int64_t row0, int64_t rows,           \
                       const float* bias, const GemmClamp* clamp, float* y);                                     \
  }
TESSERA_DECLARE_WINOGRAD(baseline)
TESSERA_DECLARE_WINOGRAD(avx2)
TESSERA_DECLARE_WINOGRAD(avx512)
#undef TESSERA_DECLARE_WINOGRAD

/// Plain triple loop: C = A * B (+ C when accumulate), any element type.
template <typename T>
void reference_gemm(int64_t m, int64_t n, int64_t k, const T* a, int64_t a_row, int64_t a_col, const T* b,
                    int64_t b_row, int64_t b_col, T* c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    T* crow = c + i * ldc;
    if (!accumulate) {
      for (int64_t j = 0; j < n; ++j) crow[j] = T(0);
    }
    for (int64_t p = 0; p < k; ++p) {
      const T av = a[i * a_row + p * a_col];
      for (int64_t j = 0; j < n; ++j) crow[j] = add_wrapping(crow[j], mul_wrapping(av, b[p * b_row + j * b_col]));
    }
  }
}

// ---------------------------------------------------------- references ----

/// Direct N-D convolution (what Conv computes), for tests and float64.
/// Shapes are NC + spatial; geometry from ir/ops/nn_internal.h.
template <typename T>
void reference_conv(const TensorView& x, const TensorView& w, const T* bias, int64_t group, const std::vector<int64_t>& stride,
                    const std::vector<int64_t>& dilation, const std::vector<int64_t>& pad_begin, const TensorView& y);

// -------------------------------------------------------- registration ----

void register_nn_conv_kernels(KernelRegistry& registry);
void register_nn_matmul_kernels(KernelRegistry& registry);
void register_nn_pool_kernels(KernelRegistry& registry);
void register_nn_norm_kernels(KernelRegistry& registry);

}  // namespace tessera::native
