// Internal to the misc kernel family: the small blocked matmul Einsum's fast
// path runs (misc_einsum.cc). Pure: writes only c.
#pragma once
#include <algorithm>
#include <cstdint>

#include "backends/native/thread_pool.h"

namespace tessera::native {

/// c[b] = a[b] x b[b] for row-major a [batch, m, k], b [batch, k, n], c [batch, m, n].
/// Rows of c are spread over the pool; within a row the k loop is outer and the
/// n loop (contiguous in b and c) inner, in column blocks that stay in cache.
template <typename T>
void batched_matmul(const T* a, const T* b, T* c, int64_t batch, int64_t m, int64_t k, int64_t n, ThreadPool& pool) {
  constexpr int64_t kColumnBlock = 512;
  const int64_t work_per_row = std::max<int64_t>(1, k * n);
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / work_per_row);
  pool.parallel_for(batch * m, grain, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t bi = row / m;
      const T* a_row = a + row * k;
      const T* b_mat = b + bi * k * n;
      T* c_row = c + row * n;
      for (int64_t j0 = 0; j0 < n; j0 += kColumnBlock) {
        const int64_t width = std::min(kColumnBlock, n - j0);
        T* out = c_row + j0;
        for (int64_t j = 0; j < width; ++j) out[j] = T(0);
        for (int64_t p = 0; p < k; ++p) {
          const T scale = a_row[p];
          const T* in = b_mat + p * n + j0;
          for (int64_t j = 0; j < width; ++j) out[j] += scale * in[j];
        }
      }
    }
  });
}

}  // namespace tessera::native
