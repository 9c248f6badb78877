// The single-precision GEMM driver: ISA dispatch (the one place that reads
// CPU features), operand packing, and the parallel loop over output tiles.
// The register-blocked microkernels live in nn_gemm_avx512.cc,
// nn_gemm_avx2.cc and (portable) at the end of this file.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "backends/native/cpu_features.h"
#define TESSERA_GEMM_ROWS_NAMESPACE baseline
#include "backends/native/kernels/nn_gemm_rows_body.h"
#include "backends/native/kernels/nn_gemv_body.h"
#include "backends/native/kernels/nn_internal.h"

namespace tessera::native {
namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

/// One row of A (x, element k at x[k * x_stride]) times packed B into c[0, n): the threads split the
/// panels once, and each runs its panels through every K-block (each block's panels read front to back),
/// keeping their sums in a row of partial sums (in cache), then writes its columns with the epilogue
/// (accumulate, bias, clamp). One fork-join a product: a decoder's token makes dozens of these, each
/// bound by reading B, and a fork-join per K-block cost more than the second core gained.
void gemv_packed(int64_t n, int64_t k, const float* x, int64_t x_stride, const PackedMatrix& b, float* c, bool accumulate,
                 const float* row_bias, const GemmClamp* clamp, ThreadPool* pool) {
  const GemmMicrokernel& kernel = *b.kernel;
  const int nr = kernel.nr;
  const int64_t panels = (n + nr - 1) / nr;
  thread_local std::vector<float> partial;
  partial.resize(static_cast<size_t>(panels * nr));
  float* sums = partial.data();
  const int64_t threads = pool ? pool->num_threads() : 1;
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t k0 = 0; k0 < k; k0 += kGemmBlockK) {
      const int64_t kc = std::min(kGemmBlockK, k - k0);
      const float* block = b.values() + k0 * b.padded_width;
      kernel.run_row(kc, x + k0 * x_stride, x_stride, block + begin * kc * nr, end - begin, sums + begin * nr, k0 == 0);
    }
    for (int64_t j = begin * nr, last = std::min(n, end * nr); j < last; ++j) {
      float v = sums[j] + (accumulate ? c[j] : 0.0f) + (row_bias ? row_bias[0] : 0.0f);
      if (clamp) v = std::min(std::max(v, clamp->lo), clamp->hi);
      c[j] = v;
    }
  };
  if (threads > 1 && panels >= 8 * threads) {
    pool->parallel_for(panels, 4, run);
  } else {
    run(0, panels);
  }
}

/// Up to kGemmRowsMax rows of A against B read in place (row-major: col_stride 1), with the epilogue
/// (accumulate, bias, clamp). Several threads split K into runs of B's rows (four a thread, so that a
/// helper woken after the caller's first run still takes its share; each a multiple of eight rows, the
/// kernel's step): each reads its runs front to
/// back into its own rows of partial sums, which the caller adds up. (Splitting the columns gave each
/// thread short pieces of every row of B, which the prefetchers followed worse.) A with a column
/// stride is copied into contiguous rows first (m x k floats).
void gemm_rows_in_place(const GemmMicrokernel& kernel, int64_t m, int64_t n, int64_t k, MatrixRef a, MatrixRef b, float* c,
                        int64_t ldc, bool accumulate, const float* row_bias, const GemmClamp* clamp, ThreadPool* pool) {
  thread_local std::vector<float> a_rows, partial_storage;
  const float* pa = a.data;
  int64_t lda = a.row_stride;
  if (a.col_stride != 1) {
    a_rows.resize(static_cast<size_t>(m * k));
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t p = 0; p < k; ++p) a_rows[static_cast<size_t>(i * k + p)] = a.data[i * a.row_stride + p * a.col_stride];
    }
    pa = a_rows.data();
    lda = k;
  }
  const int64_t threads = pool ? pool->num_threads() : 1;
  const int64_t k8 = (k + 7) / 8;  // runs of 8 rows: the kernel's step
  const int64_t tasks = threads > 1 && m * n * k >= (int64_t{1} << 15) ? std::min<int64_t>(4 * threads, std::max<int64_t>(1, k / 32)) : 1;
  if (tasks == 1) {
    kernel.run_rows(k, pa, lda, static_cast<int>(m), b.data, b.row_stride, c, ldc, n, accumulate);
  } else {
    // A slot of partial sums per thread that takes a task, claimed at its first task of this call.
    static std::atomic<uint64_t> calls{0};
    thread_local uint64_t slot_call = 0;
    thread_local int64_t slot = 0;
    const uint64_t call = calls.fetch_add(1, std::memory_order_relaxed) + 1;
    std::atomic<int64_t> slots{0};
    partial_storage.resize(static_cast<size_t>(threads * m * n));
    float* partial = partial_storage.data();
    pool->parallel_for(tasks, 1, [&](int64_t begin, int64_t end) {
      bool first = false;
      if (slot_call != call) {
        slot_call = call;
        slot = slots.fetch_add(1, std::memory_order_relaxed);
        first = true;
      }
      float* out = partial + slot * m * n;
      for (int64_t t = begin; t < end; ++t) {
        const int64_t p0 = std::min(k, t * k8 / tasks * 8), p1 = std::min(k, (t + 1) * k8 / tasks * 8);
        if (p1 <= p0 && !first) continue;
        kernel.run_rows(p1 - p0, pa + p0, lda, static_cast<int>(m), b.data + p0 * b.row_stride, b.row_stride, out, n, n, !first);
        first = false;
      }
    });
    const int64_t used = slots.load(std::memory_order_relaxed);
    for (int64_t i = 0; i < m; ++i) {
      float* row = c + i * ldc;
      for (int64_t s = 0; s < used; ++s) {
        const float* add = partial + (s * m + i) * n;
        if (s == 0 && !accumulate) {
          std::copy(add, add + n, row);
        } else {
          for (int64_t j = 0; j < n; ++j) row[j] += add[j];
        }
      }
    }
  }
  if (!row_bias && !clamp) return;
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    const float bias = row_bias ? row_bias[i] : 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      const float v = row[j] + bias;
      row[j] = clamp ? std::min(std::max(v, clamp->lo), clamp->hi) : v;
    }
  }
}

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
/// Row by row when B's rows are contiguous (each source row read once, in
/// order: large B has rows pages apart), else panel by panel, column by column.
void pack_b_block(MatrixRef b, int64_t k0, int64_t kc, int64_t n0, int64_t nc, int nr, float* dst) {
  if (b.col_stride == 1) {
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = b.data + (k0 + p) * b.row_stride + n0;
      for (int64_t j0 = 0; j0 < nc; j0 += nr) {
        const int64_t cols = std::min<int64_t>(nr, nc - j0);
        float* out = dst + (j0 / nr) * kc * nr + p * nr;
        std::memcpy(out, src + j0, static_cast<size_t>(cols) * sizeof(float));
        for (int64_t j = cols; j < nr; ++j) out[j] = 0.0f;
      }
    }
    return;
  }
  for (int64_t j0 = 0; j0 < nc; j0 += nr) {
    const int64_t cols = std::min<int64_t>(nr, nc - j0);
    float* panel = dst + (j0 / nr) * kc * nr;
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = b.data + (k0 + p) * b.row_stride + (n0 + j0) * b.col_stride;
      float* out = panel + p * nr;
      for (int64_t j = 0; j < cols; ++j) out[j] = src[j * b.col_stride];
      for (int64_t j = cols; j < nr; ++j) out[j] = 0.0f;
    }
  }
}

/// Portable microkernel: plain loops the compiler vectorises.
constexpr int kPortableMr = 4;
constexpr int kPortableNr = 16;

void portable_microkernel(int64_t k, const float* a, int64_t a_row_stride, const float* b, float* c, int64_t ldc,
                          int64_t m, int64_t n, bool accumulate, const float* row_bias, const GemmClamp* clamp) {
  // A packed (a[p*MR + i]) or in place (a[i*a_row_stride + p]).
  const int64_t a_depth = a_row_stride == 0 ? kPortableMr : 1, a_row = a_row_stride == 0 ? 1 : a_row_stride;
  float acc[kPortableMr][kPortableNr] = {};
  for (int64_t p = 0; p < k; ++p) {
    for (int i = 0; i < kPortableMr; ++i) {
      const float av = a[p * a_depth + i * a_row];
      for (int j = 0; j < kPortableNr; ++j) acc[i][j] += av * b[p * kPortableNr + j];
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    float* row = c + i * ldc;
    const float bias = row_bias ? row_bias[i] : 0.0f;
    for (int64_t j = 0; j < n; ++j) row[j] = acc[i][j] + bias + (accumulate ? row[j] : 0.0f);
    if (clamp) {
      for (int64_t j = 0; j < n; ++j) row[j] = std::min(std::max(row[j], clamp->lo), clamp->hi);
    }
  }
}

}  // namespace

const GemmMicrokernel& gemm_microkernel_portable() {
  static const GemmMicrokernel kernel{"portable", kPortableMr, kPortableNr, portable_microkernel, nullptr,
                                      gemv_row_block<kPortableNr>, nullptr, baseline::gemm_rows};
  return kernel;
}

std::vector<const GemmMicrokernel*> available_gemm_microkernels() {
  std::vector<const GemmMicrokernel*> kernels;
  if (cpu_features().avx512) kernels.push_back(&gemm_microkernel_avx512());
  if (cpu_features().avx2_fma) kernels.push_back(&gemm_microkernel_avx2());
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
  packed.data.resize(static_cast<size_t>(packed.padded_width * k));  // every element written below
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
  packed.data.resize(static_cast<size_t>(packed.padded_width * k));  // every element written below
  for (int64_t k0 = 0; k0 < k; k0 += kGemmBlockK) {
    const int64_t kc = std::min(kGemmBlockK, k - k0);
    pack_b_block(b, k0, kc, 0, n, kernel.nr, packed.data.data() + k0 * packed.padded_width);
  }
  return packed;
}

void gemm_f32(const GemmMicrokernel& kernel, int64_t m, int64_t n, int64_t k, const GemmA& a, const GemmB& b,
              float* c, int64_t ldc, bool accumulate, const float* row_bias, ThreadPool* pool,
              const GemmClamp* clamp) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        float v = (accumulate ? c[i * ldc + j] : 0.0f) + (row_bias ? row_bias[i] : 0.0f);
        c[i * ldc + j] = clamp ? std::min(std::max(v, clamp->lo), clamp->hi) : v;
      }
    }
    return;
  }
  // One row against packed B (a decoder's token): B streamed once, no tile padding.
  if (m == 1 && b.packed && !a.packed && b.packed->kernel->run_row) {
    gemv_packed(n, k, a.ref.data, a.ref.col_stride, *b.packed, c, accumulate, row_bias, clamp, pool);
    return;
  }
  // Few rows against a row-major B nothing packed (a value computed at run time):
  // B read once where it lies, instead of packed block by block and read again.
  if (m <= kGemmRowsMax && !b.packed && !b.pack && b.ref.col_stride == 1 && !a.packed && kernel.run_rows) {
    gemm_rows_in_place(kernel, m, n, k, a.ref, b.ref, c, ldc, accumulate, row_bias, clamp, pool);
    return;
  }
  // GotoBLAS order: for each NC-column chunk and KC-deep block, B's block is
  // packed once and stays in L2 while A panels (MR rows, in L1) stream past
  // it. Packing B once per block matters for convolutions, whose B is
  // gathered from the image (im2col). Two ways to use several threads:
  //  - wide B (many column panels): each thread takes whole column chunks and
  //    packs its own B blocks; one parallel_for per call, data stays per core;
  //  - narrow B: a block is packed once into a buffer all threads share, and
  //    the threads split the A panels (and groups of B panels when M is short).
  const int mr = kernel.mr, nr = kernel.nr;
  constexpr int64_t kRowPad = 16;  // floats past each row of A copied by a_panel_of
  const int64_t threads = pool ? pool->num_threads() : 1;
  const int64_t nc_max = std::max<int64_t>(nr, 512 / nr * nr);
  // Up to this many rows (4 AVX-512 panels, 8 AVX2 ones) against packed B, each B panel meets every A
  // panel in turn.
  constexpr int64_t kFewRows = 48;
  constexpr int64_t kMaxFewPanels = 16;
  const int64_t few_panels = std::min<int64_t>(kMaxFewPanels, kFewRows / mr);
  // Packed B (constant weights) read by few rows comes from memory: the tiles that prefetch it far ahead.
  const auto run_tile = m <= kFewRows && b.packed && kernel.run_stream ? kernel.run_stream : kernel.run;
  const int64_t m_panels = (m + mr - 1) / mr;
  const int64_t a_padded = a.packed ? a.packed->padded_width : 0;
  const int64_t b_padded = b.packed ? b.packed->padded_width : 0;

  auto pack_b = [&](int64_t k0, int64_t kc, int64_t n0, int64_t first, int64_t last, int64_t nlen, float* dst) {
    const int64_t col0 = n0 + first * nr;
    const int64_t cols = std::min(last * nr, nlen) - first * nr;
    if (b.pack) {
      b.pack(k0, kc, col0, cols, nr, dst + first * kc * nr);
    } else {
      pack_b_block(b.ref, k0, kc, col0, cols, nr, dst + first * kc * nr);
    }
  };
  // Where the microkernel reads A panel `panel` of depth block k0: the packed A, the row-major rows in
  // place (a full panel), or `dst` (mr x (kc + kRowPad) floats), filled here.
  // Rows whose stride is a multiple of 2 KiB fall in the same few L1 sets, more of them than the cache's
  // ways: a full panel of such rows is copied row by row into `dst` at a stride that is not, which the
  // microkernel reads as it reads rows in place (rows of 3072 floats, a transformer's second FFN product,
  // 32 rows against 3072 x 768 packed, Zen 4, one thread: 79% of the FMA peak in place, 89% copied).
  constexpr int64_t kAliasingStrideBytes = 2048;
  const bool aliasing = (a.ref.row_stride * static_cast<int64_t>(sizeof(float))) % kAliasingStrideBytes == 0;
  auto a_panel_of = [&](int64_t panel, int64_t k0, int64_t kc, float* dst) -> std::pair<const float*, int64_t> {
    const int64_t i = panel * mr;
    const int64_t rows = std::min<int64_t>(mr, m - i);
    if (a.packed) return {a.packed->values() + k0 * a_padded + panel * kc * mr, 0};
    if (a.ref.col_stride == 1 && rows == mr) {
      const float* first = a.ref.data + i * a.ref.row_stride + k0;
      if (!aliasing) return {first, a.ref.row_stride};
      for (int64_t r = 0; r < mr; ++r) {
        std::memcpy(dst + r * (kc + kRowPad), first + r * a.ref.row_stride, static_cast<size_t>(kc) * sizeof(float));
      }
      return {dst, kc + kRowPad};
    }
    pack_a_block(a.ref, i, rows, k0, kc, mr, dst);
    return {dst, 0};
  };
  // Multiplies A panels [panel_begin, panel_end) by B panels [first, last) of one packed block.
  auto compute = [&](int64_t k0, int64_t kc, int64_t n0, int64_t nlen, const float* b_block, int64_t panel_begin,
                     int64_t panel_end, int64_t first, int64_t last, std::vector<float>& a_buffer) {
    const bool acc = accumulate || k0 > 0;
    const bool last_block = k0 + kc >= k;
    auto run = [&](int64_t panel, const float* a_panel, int64_t a_row_stride, int64_t p) {
      const int64_t i = panel * mr, j = p * nr;
      run_tile(kc, a_panel, a_row_stride, b_block + p * kc * nr, c + i * ldc + n0 + j, ldc, std::min<int64_t>(mr, m - i),
               std::min<int64_t>(nr, nlen - j), acc, last_block && row_bias ? row_bias + i : nullptr,
               last_block ? clamp : nullptr);
    };
    const int64_t count = panel_end - panel_begin;
    if (count <= few_panels && b.packed) {
      // Few rows against weights streamed from memory (a prompt's tokens): each B panel meets every A
      // panel while it is in L1, so B is read from memory once, in order, at the pace of all the rows'
      // FMAs, and run_stream asks for it ahead. A panel by A panel, the first pass over a block read B
      // from memory at one panel's pace and the later ones found it in L2, memory idle. 32 rows against
      // GPT-2-small's weights (Zen 5, median of five alternating runs): AVX2 0.71-0.86 of the time,
      // AVX-512 0.82-1.0.
      a_buffer.resize(static_cast<size_t>(count * mr * (kc + kRowPad)));
      std::pair<const float*, int64_t> panels[kMaxFewPanels];
      for (int64_t t = 0; t < count; ++t) {
        panels[t] = a_panel_of(panel_begin + t, k0, kc, a_buffer.data() + t * mr * (kc + kRowPad));
      }
      for (int64_t p = first; p < last; ++p) {
        for (int64_t t = 0; t < count; ++t) run(panel_begin + t, panels[t].first, panels[t].second, p);
      }
      return;
    }
    a_buffer.resize(static_cast<size_t>(mr * (kc + kRowPad)));
    for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
      const auto [a_panel, a_row_stride] = a_panel_of(panel, k0, kc, a_buffer.data());
      for (int64_t p = first; p < last; ++p) run(panel, a_panel, a_row_stride, p);
    }
  };
  auto b_block_of = [&](int64_t k0, int64_t kc, int64_t n0, int64_t nlen, std::vector<float>& buffer,
                        bool pack_here) -> const float* {
    if (b.packed) return b.packed->values() + k0 * b_padded + (n0 / nr) * kc * nr;
    const int64_t n_panels = (nlen + nr - 1) / nr;
    buffer.resize(static_cast<size_t>(n_panels * nr * kc));
    if (pack_here) pack_b(k0, kc, n0, 0, n_panels, nlen, buffer.data());
    return buffer.data();
  };

  const int64_t total_panels = (n + nr - 1) / nr;
  // A product this large is worth waking a sleeping helper for before the first chunk (over 50 µs on
  // one core at any ISA), where the pool would otherwise time a chunk first (ThreadPool::parallel_for).
  constexpr double kWakeAtOnceMacs = double(int64_t{1} << 22);
  const bool large = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >= kWakeAtOnceMacs;
  if (threads > 1 && total_panels >= 8 * threads) {
    // Wide B: column chunks of at most nc_max, at least two per thread, and a
    // multiple of the thread count so that no thread is left with one more.
    const int64_t max_panels = std::min<int64_t>(nc_max / nr, (total_panels + 2 * threads - 1) / (2 * threads));
    const int64_t wanted = round_up((total_panels + max_panels - 1) / max_panels, threads);
    const int64_t chunk_panels = (total_panels + wanted - 1) / wanted;
    const int64_t chunks = (total_panels + chunk_panels - 1) / chunk_panels;
    pool->parallel_for(chunks, 1, [&](int64_t begin, int64_t end) {
      thread_local std::vector<float> a_buffer, b_buffer;
      for (int64_t chunk = begin; chunk < end; ++chunk) {
        const int64_t n0 = chunk * chunk_panels * nr;
        const int64_t nlen = std::min(chunk_panels * nr, n - n0);
        const int64_t panels = (nlen + nr - 1) / nr;
        for (int64_t k0 = 0; k0 < k; k0 += kGemmBlockK) {
          const int64_t kc = std::min(kGemmBlockK, k - k0);
          const float* b_block = b_block_of(k0, kc, n0, nlen, b_buffer, true);
          compute(k0, kc, n0, nlen, b_block, 0, m_panels, 0, panels, a_buffer);
        }
      }
    }, large);
    return;
  }

  // The calling thread's buffers, kept between calls (a small product in a Loop trip packed its B
  // into a fresh vector every trip). Named through references: inside the lambdas below, which the
  // team's threads run, the thread_local's own name would be each thread's own (empty) buffer.
  thread_local std::vector<float> caller_b_shared, caller_a_local;
  std::vector<float>& b_shared = caller_b_shared;
  std::vector<float>& a_local = caller_a_local;
  for (int64_t n0 = 0; n0 < n; n0 += nc_max) {
    const int64_t nlen = std::min(nc_max, n - n0);
    const int64_t n_panels = (nlen + nr - 1) / nr;
    // Split the n panels into groups only when the A panels alone cannot keep the threads busy.
    int64_t n_groups = 1;
    if (threads > 1 && m_panels < 4 * threads) n_groups = std::min(n_panels, (4 * threads + m_panels - 1) / m_panels);
    const int64_t panels_per_group = (n_panels + n_groups - 1) / n_groups;
    n_groups = (n_panels + panels_per_group - 1) / panels_per_group;
    for (int64_t k0 = 0; k0 < k; k0 += kGemmBlockK) {
      const int64_t kc = std::min(kGemmBlockK, k - k0);
      const bool parallel = threads > 1;
      const float* b_block = b_block_of(k0, kc, n0, nlen, b_shared, !parallel);
      if (!parallel) {
        compute(k0, kc, n0, nlen, b_block, 0, m_panels, 0, n_panels, a_local);
        continue;
      }
      if (!b.packed) {
        pool->parallel_for(n_panels, 1, [&](int64_t first, int64_t last) {
          pack_b(k0, kc, n0, first, last, nlen, b_shared.data());
        });
      }
      pool->parallel_for(m_panels * n_groups, 1, [&](int64_t begin, int64_t end) {
        thread_local std::vector<float> a_buffer;
        for (int64_t task = begin; task < end; ++task) {
          const int64_t panel = task / n_groups, group = task % n_groups;
          const int64_t first = group * panels_per_group;
          compute(k0, kc, n0, nlen, b_block, panel, panel + 1, first, std::min(n_panels, first + panels_per_group),
                  a_buffer);
        }
      }, large);
    }
  }
}

}  // namespace tessera::native
