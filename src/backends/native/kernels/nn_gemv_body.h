// The one-row product against packed B (GemmMicrokernel::run_row), in plain
// C++ for the portable kernel (the AVX2 and AVX-512 files write it with
// intrinsics: compiled with their flags, this loop nest was vectorised across
// the row sets, all shuffles, three times slower): a decoder's token
// multiplies one row by every weight matrix, a product bound by reading B, for
// which the tile microkernel would also compute its MR - 1 rows of padding.
#pragma once
#include <cstdint>

namespace tessera::native {

/// partial[p * NR + l] (+)= sum over the block's kc rows of x[kk * x_stride] * panel_p[kk * NR + l], for
/// `count` consecutive panels of one K-block (each kc x NR, contiguous: read front to back, once).
/// Sets the sums when `first`, else adds them.
template <int NR>
void gemv_row_block(int64_t kc, const float* x, int64_t x_stride, const float* panels, int64_t count, float* partial,
                    bool first) {
  for (int64_t p = 0; p < count; ++p) {
    const float* r = panels + p * kc * NR;
    float sum[NR] = {};
    for (int64_t kk = 0; kk < kc; ++kk, r += NR) {
      const float xv = x[kk * x_stride];
      for (int l = 0; l < NR; ++l) sum[l] += xv * r[l];
    }
    float* out = partial + p * NR;
    for (int l = 0; l < NR; ++l) out[l] = first ? sum[l] : out[l] + sum[l];
  }
}

}  // namespace tessera::native
