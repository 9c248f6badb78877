// Softmax / LogSoftmax row and column-block microkernels for float32, written as plain loops
// that the compiler vectorises (std::exp would not be: it is a libm call).
// Included by reduction_softmax.cc (baseline ISA), reduction_softmax_avx2.cc
// and reduction_softmax_avx512.cc (their ISA flags) inside a namespace each names,
// so the same source is compiled for each ISA. Pure: no allocation, no globals.
//
// Each file defines TESSERA_SOFTMAX_ROWS_NAMESPACE before including this.
#include <bit>
#include <cstdint>

namespace tessera::native::TESSERA_SOFTMAX_ROWS_NAMESPACE {

#include "backends/native/kernels/exp_polynomial.inc"

/// exp(x) for x <= ~88, within ~2 ulp; inputs below -87.3 give exp(-87.3) ~ 1e-38.
inline float exp_vectorizable(float x) {
  // Clamps as selects (not branches) so the loop stays if-converted.
  const float low = x < -87.3f ? -87.3f : x;
  return exp_of_clamped(low > 88.3f ? 88.3f : low);
}

#include "backends/native/kernels/float_lanes.inc"

inline float lanes_max(Lanes v) {
  float m = v[0];
  for (int l = 1; l < 16; ++l) m = m < v[l] ? v[l] : m;
  return m;
}

inline float lanes_sum(Lanes v) {
  float s = 0;
  for (int l = 0; l < 16; ++l) s += v[l];
  return s;
}

/// The largest element (a NaN is skipped here; the sum of exponentials then carries it to every output).
inline float row_max(const float* x, int64_t n) {
  Lanes a = {}, b = {};
  a -= __builtin_inff();
  b -= __builtin_inff();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const Lanes u = load_lanes(x + i), v = load_lanes(x + i + 16);
    a = a < u ? u : a;
    b = b < v ? v : b;
  }
  if (i + 16 <= n) {
    const Lanes u = load_lanes(x + i);
    a = a < u ? u : a;
    i += 16;
  }
  a = a < b ? b : a;
  float m = lanes_max(a);
  for (; i < n; ++i) m = m < x[i] ? x[i] : m;
  return m;
}

/// The sum of y[0, n), two accumulators apart.
inline float row_sum(const float* y, int64_t n) {
  Lanes a = {}, b = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a += load_lanes(y + i);
    b += load_lanes(y + i + 16);
  }
  if (i + 16 <= n) {
    a += load_lanes(y + i);
    i += 16;
  }
  float s = lanes_sum(a + b);
  for (; i < n; ++i) s += y[i];
  return s;
}

/// y[i] = exp(x[i] - shift); returns the sum of y.
inline float exp_shifted_and_sum(const float* x, float* y, int64_t n, float shift) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_vectorizable(x[i] - shift);  // (a plain loop: vectorised)
  return row_sum(y, n);
}

/// Sum of exp(x[i] - shift), without storing the exponentials (in blocks through a buffer on the stack).
inline float sum_exp_shifted(const float* x, int64_t n, float shift) {
  constexpr int64_t kBlock = 512;
  float block[kBlock];
  float s = 0;
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t len = n - i0 < kBlock ? n - i0 : kBlock;
    s += exp_shifted_and_sum(x + i0, block, len, shift);
  }
  return s;
}

/// exp_vectorizable of sixteen values that are at most 0 or NaN (x - max in a softmax row): the same
/// values, without the upper clamp, on Lanes so that the row's sum adds up in the same loop.
inline Lanes exp_lanes_of_nonpositive(Lanes x) {
  return exp_of_clamped(x < -87.3f ? Lanes{} - 87.3f : x);  // (a NaN compares false and stays)
}

inline void softmax_rows(const float* x, float* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * n;
    float* out = y + r * n;
    // A row of -Inf gives NaN (-Inf - -Inf), as numpy's and torch's softmax do.
    const float shift = row_max(in, n);
    // The exponentials and their sum in one pass, sixteen at a time (0.57 -> 0.43 ns an element on
    // Zen 4 at 512 columns; the same values as exp_shifted_and_sum's).
    Lanes a = {}, b = {};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
      const Lanes e0 = exp_lanes_of_nonpositive(load_lanes(in + i) - shift);
      const Lanes e1 = exp_lanes_of_nonpositive(load_lanes(in + i + 16) - shift);
      __builtin_memcpy(out + i, &e0, sizeof e0);
      __builtin_memcpy(out + i + 16, &e1, sizeof e1);
      a += e0;
      b += e1;
    }
    if (i + 16 <= n) {
      const Lanes e0 = exp_lanes_of_nonpositive(load_lanes(in + i) - shift);
      __builtin_memcpy(out + i, &e0, sizeof e0);
      a += e0;
      i += 16;
    }
    float sum = lanes_sum(a + b);
    for (; i < n; ++i) {
      out[i] = exp_vectorizable(in[i] - shift);
      sum += out[i];
    }
    const float inv = 1.0f / sum;
    for (int64_t k = 0; k < n; ++k) out[k] *= inv;
  }
}

inline void log_softmax_rows(const float* x, float* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * n;
    float* out = y + r * n;
    const float shift = row_max(in, n);
    // log is called once per row, so the libm one is fine here.
    const float log_sum = __builtin_logf(sum_exp_shifted(in, n, shift));
    // (x - max) - log(sum), not x - (max + log(sum)): max + log(sum) rounds to ulp(max), which is
    // ~1e-3 for max ~ 1e4, while x - max is exact near the max (Sterbenz) and the result's rounding
    // is only its own ulp. -Inf and NaN rows give NaN either way.
    for (int64_t i = 0; i < n; ++i) out[i] = (in[i] - shift) - log_sum;
  }
}

/// Softmax (or LogSoftmax when `log`) of `width` <= 256 adjacent columns of
/// an [extent, inner] slab along its first axis; every inner loop runs over
/// the contiguous columns.
inline void normalize_column_block(const float* in, float* out, int64_t extent, int64_t inner, int64_t width,
                                   bool log) {
  float best[256];
  float sum[256];
  for (int64_t j = 0; j < width; ++j) {
    best[j] = in[j];
    sum[j] = 0;
  }
  for (int64_t r = 1; r < extent; ++r) {
    for (int64_t j = 0; j < width; ++j) best[j] = best[j] < in[r * inner + j] ? in[r * inner + j] : best[j];
  }
  if (log) {
    for (int64_t r = 0; r < extent; ++r) {
      for (int64_t j = 0; j < width; ++j) sum[j] += exp_vectorizable(in[r * inner + j] - best[j]);
    }
    for (int64_t j = 0; j < width; ++j) sum[j] = __builtin_logf(sum[j]);
    // (x - max) - log(sum), as in log_softmax_rows.
    for (int64_t r = 0; r < extent; ++r) {
      for (int64_t j = 0; j < width; ++j) out[r * inner + j] = (in[r * inner + j] - best[j]) - sum[j];
    }
    return;
  }
  for (int64_t r = 0; r < extent; ++r) {
    for (int64_t j = 0; j < width; ++j) {
      const float e = exp_vectorizable(in[r * inner + j] - best[j]);
      out[r * inner + j] = e;
      sum[j] += e;
    }
  }
  for (int64_t j = 0; j < width; ++j) sum[j] = 1.0f / sum[j];
  for (int64_t r = 0; r < extent; ++r) {
    for (int64_t j = 0; j < width; ++j) out[r * inner + j] *= sum[j];
  }
}

}  // namespace tessera::native::TESSERA_SOFTMAX_ROWS_NAMESPACE
