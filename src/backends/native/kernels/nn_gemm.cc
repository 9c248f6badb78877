// The single-precision GEMM driver: ISA dispatch (the one place that reads
// CPU features), operand packing, and the parallel loop over output tiles.
// The register-blocked microkernels live in nn_gemm_avx512.cc,
// nn_gemm_avx2.cc and (portable) at the end of this file.
#include <algorithm>
#include <cstring>

#include "backends/native/kernels/nn_internal.h"

namespace tessera::native {
namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// Packs rows [m0, m0+mc) x depth [k0, k0+kc) of A into MR-row panels.
void pack_a_block(MatrixRef a, int64_t m0, int64_t mc, int64_t k0, int64_t kc, int mr, float* dst) {
  for (int64_t i0 = 0; i0 < mc; i0 += mr) {
    const int64_t rows = std::min<int64_t>(mr, mc - i0);
    float* panel = dst + (i0 / mr) * kc * mr;
    for (int64_t i = 0; i < mr; ++i) {
      if (i >= rows) {
        for (int64_t p = 0; p < kc; ++p) panel[p * mr + i] = 0.0f;
        continue;
      }
      const float* src = a.data + (m0 + i0 + i) * a.row_stride + k0 * a.col_stride;
      for (int64_t p = 0; p < kc; ++p) panel[p * mr + i] = src[p * a.col_stride];
    }
  }
}

/// Packs depth [k0, k0+kc) x columns [n0, n0+nc) of B into NR-column panels.
void pack_b_block(MatrixRef b, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float* dst) {
  for (int64_t j0 = 0; j0 < nc; j0 += nr) {
    const int64_t cols = std::min<int64_t>(nr, nc - j0);
    float* panel = dst + (j0 / nr) * kc * nr;
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = b.data + (k0 + p) * b.row_stride + (n0 + j0) * b.col_stride;
      float* out = panel + p * nr;
      if (b.col_stride == 1) {
        std::memcpy(out, src, static_cast<size_t>(cols) * sizeof(float));
      } else {
        for (int64_t j = 0; j < cols; ++j) out[j] = src[j * b.col_stride];
      }
      for (int64_t j = cols; j < nr; ++j) out[j] = 0.0f;
    }
  }
}

/// Portable microkernel: plain loops the compiler vectorises.
constexpr int kPortableMr = 4;
constexpr int kPortableNr = 16;

void portable_microkernel(int64_t k, const float* a, const float* b, float* c, int64_t ldc, int64_t m, int64_t n,
                          bool accumulate, const float* row_bias) {
  float acc[kPortableMr][kPortableNr] = {};
  for (int64_t p = 0; p < k; ++p) {
    for (int i = 0; i < kPortableMr; ++i) {
      const float av = a[p * kPortableMr + i];
      for (int j = 0; j < kPortableNr; ++j) acc[i][j] += av * b[p * kPortableNr + j];
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    const float bias = row_bias ? row_bias[i] : 0.0f;
    for (int64_t j = 0; j < n; ++j) row[j] = acc[i][j] + bias + (accumulate ? row[j] : 0.0f);
  }
}

}  // namespace

const GemmMicrokernel& gemm_microkernel_portable() {
  static const GemmMicrokernel kernel{"portable", kPortableMr, kPortableNr, portable_microkernel};
  return kernel;
}

std::vector<const GemmMicrokernel*> available_gemm_microkernels() {
  std::vector<const GemmMicrokernel*> kernels;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) kernels.push_back(&gemm_microkernel_avx512());
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) kernels.push_back(&gemm_microkernel_avx2());
  kernels.push_back(&gemm_microkernel_portable());
  return kernels;
}

const GemmMicrokernel& best_gemm_microkernel() {
  static const GemmMicrokernel* best = available_gemm_microkernels().front();
  return *best;
}

PackedMatrix pack_gemm_a(const GemmMicrokernel& kernel, MatrixRef a, int64_t m, int64_t k) {
  PackedMatrix packed;
  packed.kernel = &kernel;
  packed.width = m;
  packed.depth = k;
  packed.padded_width = round_up(m, kernel.mr);
  packed.data.assign(static_cast<size_t>(packed.padded_width * k), 0.0f);
  for (int64_t k0 = 0; k0 < k; k0 += kGemmBlockK) {
    const int64_t kc = std::min(kGemmBlockK, k - k0);
    pack_a_block(a, 0, m, k0, kc, kernel.mr, packed.data.data() + k0 * packed.padded_width);
  }
  return packed;
}

PackedMatrix pack_gemm_b(const GemmMicrokernel& kernel, MatrixRef b, int64_t k, int64_t n) {
  PackedMatrix packed;
  packed.kernel = &kernel;
  packed.width = n;
  packed.depth = k;
  packed.padded_width = round_up(n, kernel.nr);
  packed.data.assign(static_cast<size_t>(packed.padded_width * k), 0.0f);
  for (int64_t k0 = 0; k0 < k; k0 += kGemmBlockK) {
    const int64_t kc = std::min(kGemmBlockK, k - k0);
    pack_b_block(b, k0, kc, 0, n, kernel.nr, packed.data.data() + k0 * packed.padded_width);
  }
  return packed;
}

void gemm_f32(const GemmMicrokernel& kernel, int64_t m, int64_t n, int64_t k, const GemmA& a, const GemmB& b,
              float* c, int64_t ldc, bool accumulate, const float* row_bias, ThreadPool* pool) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = (accumulate ? c[i * ldc + j] : 0.0f) + (row_bias ? row_bias[i] : 0.0f);
    }
    return;
  }
  const int mr = kernel.mr, nr = kernel.nr;
  // Tiles: NC columns of B (a KC x NC block stays in L2 while one A panel
  // sits in L1), split M too when there are too few tiles to keep threads busy.
  const int64_t threads = pool ? pool->num_threads() : 1;
  const int64_t nc_target = std::max<int64_t>(nr, 384 / nr * nr);
  int64_t n_chunks = (n + nc_target - 1) / nc_target;
  const int64_t m_panels = (m + mr - 1) / mr;
  int64_t m_chunks = 1;
  if (n_chunks < 4 * threads) m_chunks = std::min(m_panels, (4 * threads + n_chunks - 1) / n_chunks);
  if (m_chunks * n_chunks < 4 * threads && n_chunks * nr < n) {
    n_chunks = std::min((n + nr - 1) / nr, (4 * threads + m_chunks - 1) / m_chunks);
  }
  const int64_t mc = round_up((m_panels + m_chunks - 1) / m_chunks, 1) * mr;
  const int64_t nc = round_up((n + n_chunks - 1) / n_chunks, nr);
  m_chunks = (m + mc - 1) / mc;
  n_chunks = (n + nc - 1) / nc;
  const int64_t a_padded = a.packed ? a.packed->padded_width : 0;
  const int64_t b_padded = b.packed ? b.packed->padded_width : 0;

  auto run_tile = [&](int64_t tile) {
    thread_local std::vector<float> a_buffer, b_buffer;
    const int64_t m0 = (tile % m_chunks) * mc, n0 = (tile / m_chunks) * nc;
    const int64_t mlen = std::min(mc, m - m0), nlen = std::min(nc, n - n0);
    for (int64_t k0 = 0; k0 < k; k0 += kGemmBlockK) {
      const int64_t kc = std::min(kGemmBlockK, k - k0);
      const float* a_block;
      if (a.packed) {
        a_block = a.packed->data.data() + k0 * a_padded + (m0 / mr) * kc * mr;
      } else {
        a_buffer.resize(static_cast<size_t>(round_up(mlen, mr) * kc));
        pack_a_block(a.ref, m0, mlen, k0, kc, mr, a_buffer.data());
        a_block = a_buffer.data();
      }
      const float* b_block;
      if (b.packed) {
        b_block = b.packed->data.data() + k0 * b_padded + (n0 / nr) * kc * nr;
      } else {
        b_buffer.resize(static_cast<size_t>(round_up(nlen, nr) * kc));
        if (b.pack) {
          b.pack(k0, kc, n0, nlen, nr, b_buffer.data());
        } else {
          pack_b_block(b.ref, k0, kc, n0, nlen, nr, b_buffer.data());
        }
        b_block = b_buffer.data();
      }
      const bool acc = accumulate || k0 > 0;
      const bool last = k0 + kc >= k;
      for (int64_t i = 0; i < mlen; i += mr) {
        const float* a_panel = a_block + (i / mr) * kc * mr;
        const float* bias = last && row_bias ? row_bias + m0 + i : nullptr;
        for (int64_t j = 0; j < nlen; j += nr) {
          kernel.run(kc, a_panel, b_block + (j / nr) * kc * nr, c + (m0 + i) * ldc + n0 + j, ldc,
                     std::min<int64_t>(mr, mlen - i), std::min<int64_t>(nr, nlen - j), acc, bias);
        }
      }
    }
  };
  const int64_t tiles = m_chunks * n_chunks;
  if (!pool || tiles == 1) {
    for (int64_t t = 0; t < tiles; ++t) run_tile(t);
    return;
  }
  pool->parallel_for(tiles, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) run_tile(t);
  });
}

}  // namespace tessera::native
