// Helpers shared by the reduction family's schemas (src/ir/ops/reduction.cc)
// and its native kernels (src/backends/native/kernels/reduction*.cc), so that
// shape inference and the kernels agree on which axes a node reduces.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/shape_util.h"

namespace tessera::reduction {

/// Which axes of a rank-`rank` input a Reduce* node reduces. `axes` is the
/// value of the axes input (absent: none given). An empty or absent list
/// reduces every axis, unless noop_with_empty_axes is set, when nothing is
/// reduced. Throws a user error for an out-of-range or repeated axis.
inline std::vector<bool> reduced_axes_mask(int64_t rank, const std::optional<std::vector<int64_t>>& axes,
                                           bool noop_with_empty_axes) {
  std::vector<bool> mask(static_cast<size_t>(rank), false);
  if (!axes || axes->empty()) {
    if (!noop_with_empty_axes) mask.assign(static_cast<size_t>(rank), true);
    return mask;
  }
  for (int64_t axis : *axes) {
    size_t a = static_cast<size_t>(normalize_axis(axis, rank, "axes value"));
    if (mask[a]) throw_user_error("axis ", axis, " appears twice in axes");
    mask[a] = true;
  }
  return mask;
}

/// The output shape of a reduction over `mask` (reduced dims become 1 or vanish).
inline Shape reduced_shape(const Shape& dims, const std::vector<bool>& mask, bool keepdims) {
  Shape out;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (!mask[i]) {
      out.push_back(dims[i]);
    } else if (keepdims) {
      out.push_back(1);
    }
  }
  return out;
}

}  // namespace tessera::reduction
