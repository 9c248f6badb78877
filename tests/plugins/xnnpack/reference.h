// Naive NCHW reference loops written from the ONNX definitions, for the
// XNNPACK plug-in's tests. Independent of the plug-in: no layout tricks, no
// XNNPACK, one output element at a time.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace xnnpack_test {

struct HostTensor {
  std::vector<int64_t> dims;
  std::vector<float> data;
};

inline size_t count_of(const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

inline std::vector<float> random_values(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

struct Window2d {
  int64_t kh, kw, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};

// ONNX Conv: X [N,C,H,W], W [M,C/group,KH,KW], B [M] or empty; output dims given (from the graph).
inline std::vector<float> conv_reference(const HostTensor& x, const HostTensor& w, const std::vector<float>& b,
                                         int64_t group, const Window2d& p, const std::vector<int64_t>& out) {
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], wi = x.dims[3];
  const int64_t m = w.dims[0], cg = w.dims[1], kh = w.dims[2], kw = w.dims[3];
  const int64_t oh = out[2], ow = out[3], mg = m / group;
  std::vector<float> y(count_of(out));
  for (int64_t b0 = 0; b0 < n; ++b0)
    for (int64_t o = 0; o < m; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b.empty() ? 0.0 : b[o];
          const int64_t g = o / mg;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t u = 0; u < kh; ++u)
              for (int64_t v = 0; v < kw; ++v) {
                const int64_t yy = i * p.sh - p.pad_top + u * p.dh, xx = j * p.sw - p.pad_left + v * p.dw;
                if (yy < 0 || yy >= h || xx < 0 || xx >= wi) continue;
                acc += double(x.data[((b0 * c + g * cg + ci) * h + yy) * wi + xx]) *
                       w.data[((o * cg + ci) * kh + u) * kw + v];
              }
          y[((b0 * m + o) * oh + i) * ow + j] = static_cast<float>(acc);
        }
  return y;
}

// ONNX MaxPool / AveragePool over the output dims given (ceil_mode shows as a larger output).
inline std::vector<float> pool_reference(const HostTensor& x, const Window2d& p, const std::vector<int64_t>& out,
                                         bool max, bool count_include_pad) {
  const int64_t n = x.dims[0], c = x.dims[1], h = x.dims[2], w = x.dims[3], oh = out[2], ow = out[3];
  std::vector<float> y(count_of(out));
  for (int64_t b = 0; b < n * c; ++b)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t valid = 0, counted = 0;
        for (int64_t u = 0; u < p.kh; ++u)
          for (int64_t v = 0; v < p.kw; ++v) {
            const int64_t yy = i * p.sh - p.pad_top + u * p.dh, xx = j * p.sw - p.pad_left + v * p.dw;
            if (yy >= -p.pad_top && yy < h + p.pad_bottom && xx >= -p.pad_left && xx < w + p.pad_right) ++counted;
            if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
            const float e = x.data[(b * h + yy) * w + xx];
            acc = max ? std::max<double>(acc, e) : acc + e;
            ++valid;
          }
        y[(b * oh + i) * ow + j] = static_cast<float>(max ? acc : acc / double(count_include_pad ? counted : valid));
      }
  return y;
}

// numpy broadcasting of two NCHW-ordered tensors to `out`.
template <typename F>
std::vector<float> broadcast_reference(const HostTensor& a, const HostTensor& b, const std::vector<int64_t>& out, F f) {
  const size_t rank = out.size();
  auto index = [&](const HostTensor& t, const std::vector<int64_t>& pos) {
    size_t i = 0;
    const size_t off = rank - t.dims.size();
    for (size_t d = 0; d < t.dims.size(); ++d) i = i * t.dims[d] + (t.dims[d] == 1 ? 0 : pos[off + d]);
    return i;
  };
  std::vector<float> y(count_of(out));
  std::vector<int64_t> pos(rank, 0);
  for (size_t k = 0; k < y.size(); ++k) {
    size_t r = k;
    for (size_t d = rank; d-- > 0;) {
      pos[d] = static_cast<int64_t>(r % out[d]);
      r /= out[d];
    }
    y[k] = f(a.data[index(a, pos)], b.data[index(b, pos)]);
  }
  return y;
}

// y = A [M,K] · B' + bias, B' = B [K,N] (or B [N,K] transposed).
inline std::vector<float> gemm_reference(const std::vector<float>& a, int64_t m, int64_t k, const std::vector<float>& b,
                                         bool trans_b, int64_t n, const std::vector<float>& bias, float alpha = 1.0f) {
  std::vector<float> y(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t t = 0; t < k; ++t) acc += double(a[i * k + t]) * (trans_b ? b[j * k + t] : b[t * n + j]);
      y[i * n + j] = static_cast<float>(alpha * acc + (bias.empty() ? 0.0 : bias.size() == 1 ? bias[0] : bias[j]));
    }
  return y;
}

}  // namespace xnnpack_test
