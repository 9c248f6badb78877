// Native kernels of Det and MaxUnpool, and the registration of the whole
// signal family (vision ops in signal_vision.cc, spectral ops in
// signal_spectral.cc, random generators in signal_random.cc).
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/reduction_internal.h"
#include "backends/native/kernels/signal_internal.h"
#include "ir/ops/signal_internal.h"

namespace tessera::native {
namespace {

/// Determinant of one row-major n x n matrix by LU decomposition with partial
/// pivoting, in double: the product of the pivots, negated per row swap.
template <typename T>
double determinant(const T* matrix, int64_t n, std::vector<double>& lu) {
  lu.assign(matrix, matrix + n * n);
  double det = 1;
  for (int64_t k = 0; k < n; ++k) {
    int64_t pivot = k;
    for (int64_t i = k + 1; i < n; ++i) {
      if (std::fabs(lu[static_cast<size_t>(i * n + k)]) > std::fabs(lu[static_cast<size_t>(pivot * n + k)])) pivot = i;
    }
    const double p = lu[static_cast<size_t>(pivot * n + k)];
    if (p == 0) return 0;
    if (pivot != k) {
      for (int64_t j = 0; j < n; ++j) std::swap(lu[static_cast<size_t>(k * n + j)], lu[static_cast<size_t>(pivot * n + j)]);
      det = -det;
    }
    det *= p;
    for (int64_t i = k + 1; i < n; ++i) {
      const double factor = lu[static_cast<size_t>(i * n + k)] / p;
      if (factor == 0) continue;
      for (int64_t j = k + 1; j < n; ++j) lu[static_cast<size_t>(i * n + j)] -= factor * lu[static_cast<size_t>(k * n + j)];
    }
  }
  return det;
}

void det_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, det_kernel)) return;
  const TensorView& x = ctx.input(0);
  if (x.rank() < 2 || x.shape[x.shape.size() - 1] != x.shape[x.shape.size() - 2]) {
    ctx.fail("input must be [..., M, M], got ", shape_to_string(x.shape));
  }
  const int64_t n = x.shape.back();
  const int64_t count = ctx.output(0).numel();
  dispatch_float(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* out = ctx.output(0).as<T>();
    ctx.pool().parallel_for(count, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, n * n * n)), [&](int64_t begin, int64_t end) {
      std::vector<double> lu;
      for (int64_t b = begin; b < end; ++b) out[b] = static_cast<T>(determinant(in + b * n * n, n, lu));
    });
  });
}

/// Scatters X into zeros at the flat positions I gives. The indices address
/// the default output shape ((in - 1) * stride - pads + kernel); when an
/// output_shape input asks for a larger shape, each position keeps its
/// coordinates and the extra rows/columns at the end stay zero (the ONNX
/// test's reading of output_shape).
void max_unpool_kernel(KernelContext& ctx) {
  if (run_float16_through_float32(ctx, max_unpool_kernel)) return;
  const TensorView& x = ctx.input(0);
  const TensorView& indices = ctx.input(1);
  if (indices.shape != x.shape) ctx.fail("I ", shape_to_string(indices.shape), " must have X's shape ", shape_to_string(x.shape));
  TensorView& y = ctx.output(0);
  const Shape natural = max_unpool_default_shape(ctx.node(), x.shape);
  if (y.rank() != x.rank()) ctx.fail("output_shape has rank ", y.rank(), ", expected ", x.rank());
  for (size_t d = 0; d < natural.size(); ++d) {
    if (y.shape[d] < natural[d]) {
      ctx.fail("output_shape ", shape_to_string(y.shape), " is smaller than the unpooled shape ", shape_to_string(natural));
    }
  }
  const int64_t natural_size = shape_numel(natural);
  const std::vector<int64_t> natural_strides = strides_of(natural), out_strides = strides_of(y.shape);
  std::memset(y.data, 0, y.nbytes());
  dispatch_float(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.as<T>();
    T* out = y.as<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t flat = view_int_at(indices, i);
      if (flat < 0 || flat >= natural_size) ctx.fail("index ", flat, " is out of range for the output ", shape_to_string(natural));
      int64_t target = 0;
      for (size_t d = 0; d < natural.size(); ++d) {
        target += flat / natural_strides[d] * out_strides[d];
        flat %= natural_strides[d];
      }
      out[target] = in[i];
    }
  });
}

}  // namespace

void register_signal_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "NonMaxSuppression", .run = non_max_suppression_kernel});
  registry.add({.op_type = "RoiAlign", .run = roi_align_kernel});
  registry.add({.op_type = "GridSample", .run = grid_sample_kernel});
  registry.add({.op_type = "MaxUnpool", .run = max_unpool_kernel});
  registry.add({.op_type = "Det", .run = det_kernel});
  registry.add({.op_type = "HannWindow", .run = hann_window_kernel});
  registry.add({.op_type = "HammingWindow", .run = hamming_window_kernel});
  registry.add({.op_type = "BlackmanWindow", .run = blackman_window_kernel});
  registry.add({.op_type = "DFT", .run = dft_kernel});
  registry.add({.op_type = "STFT", .run = stft_kernel});
  registry.add({.op_type = "MelWeightMatrix", .run = mel_weight_matrix_kernel});
  registry.add({.op_type = "RandomUniform", .run = random_uniform_kernel});
  registry.add({.op_type = "RandomUniformLike", .run = random_uniform_kernel});
  registry.add({.op_type = "RandomNormal", .run = random_normal_kernel});
  registry.add({.op_type = "RandomNormalLike", .run = random_normal_kernel});
  registry.add({.op_type = "Bernoulli", .run = bernoulli_kernel});
}

}  // namespace tessera::native
