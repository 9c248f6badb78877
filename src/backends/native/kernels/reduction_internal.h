// Internal to the reduction and misc kernel families: the kernels defined in
// reduction_*.cc / misc_*.cc, and small helpers they share (views of a tensor
// around one axis, permuted copies, running float16 through float32 kernels).
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/native/kernel.h"
#include "ir/shape_util.h"

namespace tessera::native {

/// A tensor seen as [outer, extent, inner] around one axis (or a run of axes).
struct AxisSplit {
  int64_t outer = 1;
  int64_t extent = 1;
  int64_t inner = 1;
};

/// Splits `shape` so that dims [first, last) form the middle extent.
inline AxisSplit split_around(const Shape& shape, size_t first, size_t last) {
  AxisSplit s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < first) {
      s.outer *= shape[i];
    } else if (i < last) {
      s.extent *= shape[i];
    } else {
      s.inner *= shape[i];
    }
  }
  return s;
}

/// out = transpose(in, perm): out's dim i is in's dim perm[i]. Plain odometer
/// loop over the output, with the innermost input stride kept in a register.
template <typename T>
void permute_copy(const T* in, const Shape& in_shape, const std::vector<int64_t>& perm, T* out) {
  const size_t rank = in_shape.size();
  std::vector<int64_t> in_strides = strides_of(in_shape);
  Shape out_shape(rank);
  std::vector<int64_t> strides(rank);
  for (size_t i = 0; i < rank; ++i) {
    out_shape[i] = in_shape[static_cast<size_t>(perm[i])];
    strides[i] = in_strides[static_cast<size_t>(perm[i])];
  }
  const int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  if (rank == 0) {
    out[0] = in[0];
    return;
  }
  const int64_t last = out_shape[rank - 1];
  const int64_t last_stride = strides[rank - 1];
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (int64_t base = 0; base < n; base += last) {
    for (int64_t j = 0; j < last; ++j) out[base + j] = in[offset + j * last_stride];
    for (size_t d = rank - 1; d-- > 0;) {
      offset += strides[d];
      if (++index[d] < out_shape[d]) break;
      offset -= strides[d] * out_shape[d];
      index[d] = 0;
    }
  }
}

/// When any input or output is float16, runs `kernel` on float32 copies and
/// converts the float16 outputs back, returning true; returns false (doing
/// nothing) otherwise. The float kernels of these families compute float16 in
/// float32, which is also how ONNX's reference rounds.
bool run_float16_through_float32(KernelContext& ctx, KernelFn kernel);

// Kernels of the reduction family, registered in reduction.cc.
void argmax_kernel(KernelContext& ctx);
void argmin_kernel(KernelContext& ctx);
void topk_kernel(KernelContext& ctx);
void softmax_kernel(KernelContext& ctx);
void log_softmax_kernel(KernelContext& ctx);
void hardmax_kernel(KernelContext& ctx);

// Kernels of the misc family, registered in misc.cc.
void resize_kernel(KernelContext& ctx);
void upsample_kernel(KernelContext& ctx);
void einsum_kernel(KernelContext& ctx);
void negative_log_likelihood_loss_kernel(KernelContext& ctx);
void softmax_cross_entropy_loss_kernel(KernelContext& ctx);

}  // namespace tessera::native
