// Internal to the native nn kernels: the single-precision GEMM (microkernels
// per ISA, packing, the parallel driver), reference implementations used by
// the tests, and the per-group registration functions called from
// register_nn_kernels (kernels/nn.cc).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backends/native/kernel.h"

namespace tessera::native {

// ---------------------------------------------------------------- GEMM ----

/// A register-blocked microkernel computing one MR x NR tile of C from an A
/// panel (k rows of MR floats: a[p*MR + i] = A(i, p)) and a B panel (k rows of
/// NR floats: b[p*NR + j] = B(p, j)). Writes rows < m and columns < n of the
/// tile at c (row stride ldc): c = acc (+ c when accumulate) (+ row_bias[i]
/// when row_bias is non-null). Pure: no allocation, no globals.
struct GemmMicrokernel {
  const char* name;
  int mr;
  int nr;
  void (*run)(int64_t k, const float* a, const float* b, float* c, int64_t ldc, int64_t m, int64_t n,
              bool accumulate, const float* row_bias);
};

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
struct PackedMatrix {
  const GemmMicrokernel* kernel = nullptr;
  int64_t width = 0;   // M for A, N for B
  int64_t depth = 0;   // K
  int64_t padded_width = 0;
  std::vector<float> data;
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

/// C[M x N] (row stride ldc) = A * B (+ C when accumulate) (+ row_bias[i]),
/// parallelised over output tiles. Packed operands must come from `kernel`.
void gemm_f32(const GemmMicrokernel& kernel, int64_t m, int64_t n, int64_t k, const GemmA& a, const GemmB& b,
              float* c, int64_t ldc, bool accumulate, const float* row_bias, ThreadPool* pool);

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
      for (int64_t j = 0; j < n; ++j) crow[j] += av * b[p * b_row + j * b_col];
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
