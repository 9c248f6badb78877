// Native kernels of Softmax, LogSoftmax and Hardmax.
//
// Before opset 13 these ops coerce the input to 2-D at `axis` (default 1) and
// normalise each row of the flattened [prod(dims[:axis]), prod(dims[axis:])]
// matrix; from opset 13 they normalise along the one axis (default -1). Both
// reduce to [outer, extent, inner] with the middle extent normalised.
// Float32 Softmax/LogSoftmax use the vectorised microkernels of
// reduction_softmax_rows.h (AVX-512 or AVX2 builds when the CPU has them);
// float64 and Hardmax run the plain loops below.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/native/cpu_features.h"
#include "backends/native/dispatch.h"
#include "backends/native/kernels/reduction_internal.h"

#define TESSERA_SOFTMAX_ROWS_NAMESPACE baseline
#include "backends/native/kernels/reduction_softmax_rows.h"

namespace tessera::native {

// Defined in reduction_softmax_avx512.cc and reduction_softmax_avx2.cc.
void softmax_rows_avx512(const float* x, float* y, int64_t rows, int64_t n);
void log_softmax_rows_avx512(const float* x, float* y, int64_t rows, int64_t n);
void normalize_column_block_avx512(const float* in, float* out, int64_t extent, int64_t inner, int64_t width, bool log);
void softmax_rows_avx2(const float* x, float* y, int64_t rows, int64_t n);
void log_softmax_rows_avx2(const float* x, float* y, int64_t rows, int64_t n);
void normalize_column_block_avx2(const float* in, float* out, int64_t extent, int64_t inner, int64_t width, bool log);

namespace {

enum class Normalization { kSoftmax, kLogSoftmax, kHardmax };

/// The float32 microkernels for this CPU, chosen once: the one dispatch place.
struct FloatMicrokernels {
  void (*softmax_rows)(const float*, float*, int64_t, int64_t);
  void (*log_softmax_rows)(const float*, float*, int64_t, int64_t);
  void (*column_block)(const float*, float*, int64_t, int64_t, int64_t, bool);
};

const FloatMicrokernels& float_microkernels() {
  static const FloatMicrokernels chosen = [] {
    if (cpu_features().avx512) {
      return FloatMicrokernels{softmax_rows_avx512, log_softmax_rows_avx512, normalize_column_block_avx512};
    }
    if (cpu_features().avx2_fma) {
      return FloatMicrokernels{softmax_rows_avx2, log_softmax_rows_avx2, normalize_column_block_avx2};
    }
    return FloatMicrokernels{baseline::softmax_rows, baseline::log_softmax_rows, baseline::normalize_column_block};
  }();
  return chosen;
}

AxisSplit softmax_split(const KernelContext& ctx, const Shape& shape) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (ctx.opset() >= 13) {
    int64_t axis = ctx.attrs().get_int_or("axis", -1);
    if (axis < -rank || axis >= rank) ctx.fail("axis ", axis, " is out of range for rank ", rank);
    if (axis < 0) axis += rank;
    return split_around(shape, static_cast<size_t>(axis), static_cast<size_t>(axis) + 1);
  }
  int64_t axis = ctx.attrs().get_int_or("axis", 1);
  if (axis < -rank || axis > rank) ctx.fail("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  return split_around(shape, static_cast<size_t>(axis), shape.size());
}

/// Plain rows: used for float64 (float32 rows go to the microkernels).
template <typename T>
void normalize_rows(const T* x, T* y, int64_t rows, int64_t n, Normalization kind) {
  for (int64_t r = 0; r < rows; ++r) {
    const T* in = x + r * n;
    T* out = y + r * n;
    int64_t best = 0;
    // The first NaN wins, as in ArgMax (Hardmax's ONNX reference is numpy's argmax).
    for (int64_t i = 1; i < n; ++i) best = in[i] > in[best] || (in[i] != in[i] && in[best] == in[best]) ? i : best;
    if (kind == Normalization::kHardmax) {
      for (int64_t i = 0; i < n; ++i) out[i] = T(i == best ? 1 : 0);
      continue;
    }
    const T m = in[best];
    const T shift = std::isfinite(m) ? m : T(0);
    T sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(in[i] - shift);
    if (kind == Normalization::kSoftmax) {
      const T inv = T(1) / sum;
      for (int64_t i = 0; i < n; ++i) out[i] = std::exp(in[i] - shift) * inv;
    } else {
      // (x - shift) - log(sum): shift + log(sum) would round to ulp(shift) (see log_softmax_rows).
      const T log_sum = std::log(sum);
      for (int64_t i = 0; i < n; ++i) out[i] = (in[i] - shift) - log_sum;
    }
  }
}

constexpr int64_t kColumnBlock = 256;

/// Normalises x ([outer, extent, inner]) along the middle axis, a block of
/// columns at a time so that every inner loop runs over contiguous columns.
template <typename T>
void normalize_columns(const T* x, T* y, int64_t outer, int64_t extent, int64_t inner, Normalization kind,
                       ThreadPool& pool) {
  const int64_t blocks = (inner + kColumnBlock - 1) / kColumnBlock;
  const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, extent * std::min(inner, kColumnBlock)));
  pool.parallel_for(outer * blocks, grain, [&](int64_t begin, int64_t end) {
    T best[kColumnBlock];
    T sum[kColumnBlock];
    int64_t best_index[kColumnBlock];
    for (int64_t task = begin; task < end; ++task) {
      const int64_t o = task / blocks;
      const int64_t j0 = (task % blocks) * kColumnBlock;
      const int64_t width = std::min(kColumnBlock, inner - j0);
      const T* in = x + o * extent * inner + j0;
      T* out = y + o * extent * inner + j0;
      if constexpr (std::is_same_v<T, float>) {
        if (kind != Normalization::kHardmax) {
          float_microkernels().column_block(in, out, extent, inner, width, kind == Normalization::kLogSoftmax);
          continue;
        }
      }
      for (int64_t j = 0; j < width; ++j) {
        best[j] = in[j];
        best_index[j] = 0;
        sum[j] = 0;
      }
      for (int64_t r = 1; r < extent; ++r) {
        for (int64_t j = 0; j < width; ++j) {
          const T v = in[r * inner + j];
          const bool greater = v > best[j] || (v != v && best[j] == best[j]);
          best[j] = greater ? in[r * inner + j] : best[j];
          best_index[j] = greater ? r : best_index[j];
        }
      }
      if (kind == Normalization::kHardmax) {
        for (int64_t r = 0; r < extent; ++r) {
          for (int64_t j = 0; j < width; ++j) out[r * inner + j] = T(best_index[j] == r ? 1 : 0);
        }
        continue;
      }
      for (int64_t j = 0; j < width; ++j) best[j] = std::isfinite(best[j]) ? best[j] : T(0);
      // Two copies of the loop so that neither holds a branch (which would stop vectorisation).
      if (kind == Normalization::kSoftmax) {
        for (int64_t r = 0; r < extent; ++r) {
          for (int64_t j = 0; j < width; ++j) {
            const T e = std::exp(in[r * inner + j] - best[j]);
            out[r * inner + j] = e;
            sum[j] += e;
          }
        }
      } else {
        for (int64_t r = 0; r < extent; ++r) {
          for (int64_t j = 0; j < width; ++j) sum[j] += std::exp(in[r * inner + j] - best[j]);
        }
      }
      if (kind == Normalization::kSoftmax) {
        for (int64_t j = 0; j < width; ++j) sum[j] = T(1) / sum[j];
        for (int64_t r = 0; r < extent; ++r) {
          for (int64_t j = 0; j < width; ++j) out[r * inner + j] *= sum[j];
        }
      } else {
        for (int64_t j = 0; j < width; ++j) sum[j] = std::log(sum[j]);
        for (int64_t r = 0; r < extent; ++r) {
          for (int64_t j = 0; j < width; ++j) out[r * inner + j] = (in[r * inner + j] - best[j]) - sum[j];
        }
      }
    }
  });
}

template <Normalization kKind>
void normalization_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, normalization_kernel<kKind>)) return;
  const TensorView& x = ctx.input(0);
  TensorView& y = ctx.output(0);
  const AxisSplit s = softmax_split(ctx, x.shape);
  if (x.numel() == 0) return;
  dispatch_float(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* out = y.as<T>();
    if (s.inner != 1) {
      normalize_columns<T>(in, out, s.outer, s.extent, s.inner, kKind, ctx.pool());
      return;
    }
    const int64_t grain = std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(1, s.extent));
    ctx.pool().parallel_for(s.outer, grain, [&](int64_t begin, int64_t end) {
      const T* rows_in = in + begin * s.extent;
      T* rows_out = out + begin * s.extent;
      const int64_t rows = end - begin;
      if constexpr (std::is_same_v<T, float> && kKind != Normalization::kHardmax) {
        const FloatMicrokernels& micro = float_microkernels();
        (kKind == Normalization::kSoftmax ? micro.softmax_rows : micro.log_softmax_rows)(rows_in, rows_out, rows,
                                                                                          s.extent);
      } else {
        normalize_rows<T>(rows_in, rows_out, rows, s.extent, kKind);
      }
    });
  });
}

}  // namespace

void softmax_kernel(KernelContext& ctx) { normalization_kernel<Normalization::kSoftmax>(ctx); }
void log_softmax_kernel(KernelContext& ctx) { normalization_kernel<Normalization::kLogSoftmax>(ctx); }
void hardmax_kernel(KernelContext& ctx) { normalization_kernel<Normalization::kHardmax>(ctx); }

}  // namespace tessera::native
