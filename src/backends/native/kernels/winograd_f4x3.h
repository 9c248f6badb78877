// Winograd F(4x4, 3x3)'s weight transform U = G g G^T, shared by native's
// kernel (nn_conv_winograd.cc) and the oneDNN backend's (dnnl_winograd.cc):
// one home for G, and for how many tiles its transformed weights need. In
// double; each caller rounds and lays U out its own way.
#pragma once

#include <cstdint>

namespace tessera::native {

/// Filters (input x output channels) per 4x4 output tile above which Winograd's transformed weights
/// (four times the layer's, read by every chunk of tiles) are not worth keeping: native's rule
/// (winograd_conv_worthwhile; a 512 x 512 convolution on nine tiles ran slower than directly) and the
/// oneDNN backend's at an open region's first shape (dnnl_tuning.cc).
constexpr int64_t kWinogradWeightsPerTile = 2048;

/// u[r * 6 + c] = (G g G^T)[r][c] for one 3x3 filter g (row-major).
inline void winograd_f4x3_weights(const float* g, double u[36]) {
  // G of F(4x4, 3x3) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015).
  constexpr double kG[6][3] = {{1.0 / 4, 0, 0},
                               {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                               {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                               {1.0 / 24, 1.0 / 12, 1.0 / 6},
                               {1.0 / 24, -1.0 / 12, 1.0 / 6},
                               {0, 0, 1}};
  double gt[6][3];  // G g
  for (int r = 0; r < 6; ++r) {
    for (int k = 0; k < 3; ++k) gt[r][k] = kG[r][0] * g[k] + kG[r][1] * g[3 + k] + kG[r][2] * g[6 + k];
  }
  for (int r = 0; r < 6; ++r) {
    for (int c = 0; c < 6; ++c) u[r * 6 + c] = gt[r][0] * kG[c][0] + gt[r][1] * kG[c][1] + gt[r][2] * kG[c][2];
  }
}

}  // namespace tessera::native
