// The transforms of winograd_conv (nn_conv_winograd.cc, which has the plan),
// in plain C++ compiled into each ISA's file with its flags: every loop runs
// over consecutive tiles, contiguous in memory, which the
// compiler turns into vector code (16 tiles an instruction under AVX-512).
//
// A chunk's columns are its tiles, tw + 1 per tile row (the last one a dummy
// that is computed and dropped), so every loop runs over the whole chunk.
// Input, per channel: the six input rows each tile row reads, zero-padded,
// side by side; B^T down them (element by element); their columns split into
// four phases (padded column 4u + b is phase b % 4 at u + b / 4), so that B
// across the columns of tile u reads position u or u + 1 of a phase:
// V[point][channel][column]. Output, per output channel: A^T across, then
// down, the tiles' 36 products, plus bias, clamped; the four columns of each
// tile interleaved back into the output rows. The input transform also
// notices an Inf or NaN as it copies the rows (winograd_conv then gives way
// to the direct convolution).
//
// Each file defines TESSERA_WINOGRAD_NAMESPACE before including this (the same
// source compiled once per ISA, in a namespace of its own).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "backends/native/kernels/nn_internal.h"

namespace tessera::native::TESSERA_WINOGRAD_NAMESPACE {
namespace {

using Buffer = std::vector<float, UninitializedAllocator<float>>;

float* grown(Buffer& buffer, int64_t floats) {
  if (buffer.size() < static_cast<size_t>(floats)) buffer.resize(static_cast<size_t>(floats));
  return buffer.data();
}

/// B^T x for F(4x4, 3x3)'s B^T (rows 4 0 -5 0 1 0 / 0 -4 -4 1 1 0 / 0 4 -4 -1 1 0 /
/// 0 -2 -1 2 1 0 / 0 2 -1 -2 1 0 / 0 4 0 -5 0 1), element j of each of six rows x.
#define TESSERA_WINOGRAD_B_T(x0, x1, x2, x3, x4, x5, r0, r1, r2, r3, r4, r5) \
  r0 = 4 * (x0) - 5 * (x2) + (x4);                                         \
  r1 = ((x3) + (x4)) - 4 * ((x1) + (x2));                                  \
  r2 = 4 * ((x1) - (x2)) + ((x4) - (x3));                                  \
  r3 = 2 * ((x3) - (x1)) + ((x4) - (x2));                                  \
  r4 = ((x4) - (x2)) - 2 * ((x3) - (x1));                                  \
  r5 = 4 * (x1) - 5 * (x3) + (x5)

}  // namespace

bool winograd_input(const WinogradTiles& g, const float* x, int64_t c, int64_t row0, int64_t rows, float* v) {
  const WinogradConv& s = g.conv;
  const int64_t len = g.tw + 1, width = 4 * len;  // a tile row's padded columns (it reads 4 tw + 2 of them)
  const int64_t n_cols = rows * len;               // the chunk's columns: len per tile row, the last a dummy
  thread_local Buffer storage;
  float* d = grown(storage, 12 * n_cols * 4 + 4 * (n_cols + 1));
  float* t = d + 6 * 4 * n_cols;   // B^T down the rows
  float* ph = t + 6 * 4 * n_cols;  // one row of t as four phases of n_cols (+ 1)
  const int64_t lo = std::clamp<int64_t>(s.pad_left, 0, width);
  const int64_t hi = std::clamp<int64_t>(s.pad_left + s.in_w, lo, width);
  // Row a of tile row r: d[a][r * width + q], padded column q.
  uint32_t nonfinite = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t tile_row = row0 + r, n = tile_row / g.th, i = tile_row % g.th;
    const float* image = x + (n * s.in_channels + c) * s.in_h * s.in_w;
    for (int a = 0; a < 6; ++a) {
      float* row = d + a * 4 * n_cols + r * width;
      const int64_t h = 4 * i - s.pad_top + a;
      if (h < 0 || h >= s.in_h) {
        std::fill(row, row + width, 0.0f);
        continue;
      }
      std::fill(row, row + lo, 0.0f);
      const float* __restrict src = image + h * s.in_w + (lo - s.pad_left);
      float* __restrict dst = row + lo;
      for (int64_t q = 0; q < hi - lo; ++q) {
        dst[q] = src[q];
        nonfinite |= !(std::fabs(src[q]) <= std::numeric_limits<float>::max());  // Inf or NaN
      }
      std::fill(row + hi, row + width, 0.0f);
    }
  }
  if (nonfinite) return false;
  {
    const int64_t count = 4 * n_cols, stride = 4 * n_cols;
    const float* __restrict x0 = d;
    const float* __restrict x1 = d + stride;
    const float* __restrict x2 = d + 2 * stride;
    const float* __restrict x3 = d + 3 * stride;
    const float* __restrict x4 = d + 4 * stride;
    const float* __restrict x5 = d + 5 * stride;
    float* __restrict r0 = t;
    float* __restrict r1 = t + stride;
    float* __restrict r2 = t + 2 * stride;
    float* __restrict r3 = t + 3 * stride;
    float* __restrict r4 = t + 4 * stride;
    float* __restrict r5 = t + 5 * stride;
    #pragma GCC ivdep
    for (int64_t q = 0; q < count; ++q) {
      TESSERA_WINOGRAD_B_T(x0[q], x1[q], x2[q], x3[q], x4[q], x5[q], r0[q], r1[q], r2[q], r3[q], r4[q], r5[q]);
    }
  }
  // Column 4u + b of t's flat rows is phase b at u (u = r * len + j: width = 4 len), so B across the
  // columns of every tile of the chunk is one loop over u; at a tile row's dummy column it reads the next
  // row's first (a value nobody uses).
  for (int a = 0; a < 6; ++a) {
    const float* __restrict row = t + a * 4 * n_cols;
    float* __restrict p0 = ph;
    float* __restrict p1 = ph + (n_cols + 1);
    float* __restrict p2 = ph + 2 * (n_cols + 1);
    float* __restrict p3 = ph + 3 * (n_cols + 1);
    #pragma GCC ivdep
    for (int64_t u = 0; u < n_cols; ++u) {
      p0[u] = row[4 * u];
      p1[u] = row[4 * u + 1];
      p2[u] = row[4 * u + 2];
      p3[u] = row[4 * u + 3];
    }
    p0[n_cols] = p1[n_cols] = 0.0f;
    float* __restrict o0 = v + ((a * 6 + 0) * s.in_channels + c) * n_cols;
    float* __restrict o1 = v + ((a * 6 + 1) * s.in_channels + c) * n_cols;
    float* __restrict o2 = v + ((a * 6 + 2) * s.in_channels + c) * n_cols;
    float* __restrict o3 = v + ((a * 6 + 3) * s.in_channels + c) * n_cols;
    float* __restrict o4 = v + ((a * 6 + 4) * s.in_channels + c) * n_cols;
    float* __restrict o5 = v + ((a * 6 + 5) * s.in_channels + c) * n_cols;
    #pragma GCC ivdep
    for (int64_t u = 0; u < n_cols; ++u) {
      TESSERA_WINOGRAD_B_T(p0[u], p1[u], p2[u], p3[u], p0[u + 1], p1[u + 1], o0[u], o1[u], o2[u], o3[u], o4[u], o5[u]);
    }
  }
  return true;
}

void winograd_output(const WinogradTiles& g, const float* m, int64_t o, int64_t row0, int64_t rows,
                     const float* bias, const GemmClamp* clamp, float* y) {
  const WinogradConv& s = g.conv;
  const int64_t len = g.tw + 1, n_cols = rows * len;
  thread_local Buffer storage;
  float* cols = grown(storage, 40 * n_cols);  // [6 rows a][4 columns q][n_cols]: A^T across each row
  float* out = cols + 24 * n_cols;            // [4 rows][4 columns][n_cols]
  const float b = bias ? bias[o] : 0.0f;
  const float lo = clamp ? clamp->lo : -INFINITY, hi = clamp ? clamp->hi : INFINITY;
  // A^T's rows: 1 1 1 1 1 0 / 0 1 -1 2 -2 0 / 0 1 1 4 4 0 / 0 1 -1 8 -8 1.
  for (int a = 0; a < 6; ++a) {
    const float* __restrict m0 = m + ((a * 6 + 0) * s.out_channels + o) * n_cols;
    const float* __restrict m1 = m + ((a * 6 + 1) * s.out_channels + o) * n_cols;
    const float* __restrict m2 = m + ((a * 6 + 2) * s.out_channels + o) * n_cols;
    const float* __restrict m3 = m + ((a * 6 + 3) * s.out_channels + o) * n_cols;
    const float* __restrict m4 = m + ((a * 6 + 4) * s.out_channels + o) * n_cols;
    const float* __restrict m5 = m + ((a * 6 + 5) * s.out_channels + o) * n_cols;
    float* __restrict c0 = cols + (a * 4 + 0) * n_cols;
    float* __restrict c1 = cols + (a * 4 + 1) * n_cols;
    float* __restrict c2 = cols + (a * 4 + 2) * n_cols;
    float* __restrict c3 = cols + (a * 4 + 3) * n_cols;
    #pragma GCC ivdep
    for (int64_t u = 0; u < n_cols; ++u) {
      const float sum12 = m1[u] + m2[u], diff12 = m1[u] - m2[u];
      const float sum34 = m3[u] + m4[u], diff34 = m3[u] - m4[u];
      c0[u] = m0[u] + sum12 + sum34;
      c1[u] = diff12 + 2 * diff34;
      c2[u] = sum12 + 4 * sum34;
      c3[u] = diff12 + 8 * diff34 + m5[u];
    }
  }
  for (int q = 0; q < 4; ++q) {
    const float* __restrict s0 = cols + (0 * 4 + q) * n_cols;
    const float* __restrict s1 = cols + (1 * 4 + q) * n_cols;
    const float* __restrict s2 = cols + (2 * 4 + q) * n_cols;
    const float* __restrict s3 = cols + (3 * 4 + q) * n_cols;
    const float* __restrict s4 = cols + (4 * 4 + q) * n_cols;
    const float* __restrict s5 = cols + (5 * 4 + q) * n_cols;
    float* __restrict y0 = out + (0 * 4 + q) * n_cols;
    float* __restrict y1 = out + (1 * 4 + q) * n_cols;
    float* __restrict y2 = out + (2 * 4 + q) * n_cols;
    float* __restrict y3 = out + (3 * 4 + q) * n_cols;
    #pragma GCC ivdep
    for (int64_t u = 0; u < n_cols; ++u) {
      const float sum12 = s1[u] + s2[u], diff12 = s1[u] - s2[u];
      const float sum34 = s3[u] + s4[u], diff34 = s3[u] - s4[u];
      // min(max(v, lo), hi) with v first: a NaN v passes through both.
      y0[u] = std::min(std::max(s0[u] + sum12 + sum34 + b, lo), hi);
      y1[u] = std::min(std::max(diff12 + 2 * diff34 + b, lo), hi);
      y2[u] = std::min(std::max(sum12 + 4 * sum34 + b, lo), hi);
      y3[u] = std::min(std::max(diff12 + 8 * diff34 + s5[u] + b, lo), hi);
    }
  }
  // The tiles' columns interleaved back into the output rows (edge tiles cut at the output's edge).
  const int64_t full = s.out_w / 4, rest = s.out_w % 4;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t tile_row = row0 + r, n = tile_row / g.th, i = tile_row % g.th;
    float* plane = y + (n * s.out_channels + o) * s.out_h * s.out_w;
    for (int qq = 0; qq < 4 && 4 * i + qq < s.out_h; ++qq) {
      float* __restrict row = plane + (4 * i + qq) * s.out_w;
      const float* __restrict v0 = out + (qq * 4 + 0) * n_cols + r * len;
      const float* __restrict v1 = out + (qq * 4 + 1) * n_cols + r * len;
      const float* __restrict v2 = out + (qq * 4 + 2) * n_cols + r * len;
      const float* __restrict v3 = out + (qq * 4 + 3) * n_cols + r * len;
      #pragma GCC ivdep
      for (int64_t j = 0; j < full; ++j) {
        row[4 * j] = v0[j];
        row[4 * j + 1] = v1[j];
        row[4 * j + 2] = v2[j];
        row[4 * j + 3] = v3[j];
      }
      for (int64_t q = 0; q < rest; ++q) row[4 * full + q] = out[(qq * 4 + q) * n_cols + r * len + full];
    }
  }
}

#undef TESSERA_WINOGRAD_B_T

}  // namespace tessera::native::TESSERA_WINOGRAD_NAMESPACE
