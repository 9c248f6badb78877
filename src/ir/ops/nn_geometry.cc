// Window geometry of Conv, ConvTranspose and the pooling ops: resolves
// auto_pad, pads, strides, dilations and ceil_mode into explicit per-dim
// values. Shared by shape inference and the kernels (see nn_internal.h).
#include <algorithm>

#include "ir/error.h"
#include "ir/ops/nn_internal.h"

namespace tessera {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

/// Reads an ints attribute of `rank` entries (or the fallback value repeated).
std::vector<int64_t> per_dim(const Node& node, const char* name, size_t count, int64_t fallback) {
  std::vector<int64_t> v = node.attrs.get_ints_or(name, {});
  if (v.empty()) return std::vector<int64_t>(count, fallback);
  if (v.size() != count) {
    throw_user_error(node.describe(), ": attribute ", name, " has ", v.size(), " values, expected ", count);
  }
  return v;
}

/// Fills stride, dilation and explicit pads; validates them.
void read_common(const Node& node, WindowGeometry& g) {
  const size_t r = g.rank();
  g.stride = per_dim(node, "strides", r, 1);
  g.dilation = per_dim(node, "dilations", r, 1);
  std::vector<int64_t> pads = per_dim(node, "pads", 2 * r, 0);
  g.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
  g.pad_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(r), pads.end());
  for (size_t d = 0; d < r; ++d) {
    if (g.stride[d] <= 0) throw_user_error(node.describe(), ": strides[", d, "] = ", g.stride[d], " must be positive");
    if (g.dilation[d] <= 0) {
      throw_user_error(node.describe(), ": dilations[", d, "] = ", g.dilation[d], " must be positive");
    }
    if (g.kernel[d] <= 0) throw_user_error(node.describe(), ": kernel size ", g.kernel[d], " at dim ", d, " must be positive");
    if (g.pad_begin[d] < 0 || g.pad_end[d] < 0) throw_user_error(node.describe(), ": negative pads are not allowed");
  }
}

}  // namespace

int64_t WindowGeometry::output_size() const { return shape_numel(output); }
int64_t WindowGeometry::input_size() const { return shape_numel(input); }
int64_t WindowGeometry::kernel_size() const { return shape_numel(kernel); }

WindowGeometry window_geometry(const Node& node, const std::vector<int64_t>& input_spatial,
                               const std::vector<int64_t>& kernel_spatial, bool allow_ceil_mode) {
  WindowGeometry g;
  g.input = input_spatial;
  g.kernel = kernel_spatial;
  if (g.kernel.size() != g.input.size()) {
    throw_user_error(node.describe(), ": kernel has ", g.kernel.size(), " spatial dims but the input has ", g.input.size());
  }
  read_common(node, g);
  const std::string auto_pad = node.attrs.get_string_or("auto_pad", "NOTSET");
  const bool ceil_mode = allow_ceil_mode && node.attrs.get_int_or("ceil_mode", 0) != 0;
  const size_t r = g.rank();
  g.output.resize(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t extent = (g.kernel[d] - 1) * g.dilation[d] + 1;
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      g.output[d] = ceil_div(g.input[d], g.stride[d]);
      int64_t total = std::max<int64_t>(0, (g.output[d] - 1) * g.stride[d] + extent - g.input[d]);
      int64_t small = total / 2;
      g.pad_begin[d] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pad_end[d] = total - g.pad_begin[d];
      continue;
    }
    if (auto_pad == "VALID") {
      g.pad_begin[d] = g.pad_end[d] = 0;
    } else if (auto_pad != "NOTSET") {
      throw_user_error(node.describe(), ": auto_pad '", auto_pad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
    const int64_t span = g.input[d] + g.pad_begin[d] + g.pad_end[d] - extent;
    if (span < 0) {
      throw_user_error(node.describe(), ": kernel extent ", extent, " exceeds the padded input size ",
                       g.input[d] + g.pad_begin[d] + g.pad_end[d], " at spatial dim ", d);
    }
    if (ceil_mode) {
      g.output[d] = ceil_div(span, g.stride[d]) + 1;
      // A last window that would start inside the end padding is dropped (as in PyTorch and ONNX's reference).
      if ((g.output[d] - 1) * g.stride[d] >= g.input[d] + g.pad_begin[d]) --g.output[d];
    } else {
      g.output[d] = span / g.stride[d] + 1;
    }
  }
  return g;
}

WindowGeometry conv_transpose_geometry(const Node& node, const std::vector<int64_t>& input_spatial,
                                       const std::vector<int64_t>& kernel_spatial) {
  WindowGeometry g;
  g.input = input_spatial;
  g.kernel = kernel_spatial;
  if (g.kernel.size() != g.input.size()) {
    throw_user_error(node.describe(), ": kernel has ", g.kernel.size(), " spatial dims but the input has ", g.input.size());
  }
  read_common(node, g);
  const size_t r = g.rank();
  const std::vector<int64_t> output_padding = per_dim(node, "output_padding", r, 0);
  std::vector<int64_t> output_shape = node.attrs.get_ints_or("output_shape", {});
  // output_shape may include the N and C dims.
  if (output_shape.size() == r + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (!output_shape.empty() && output_shape.size() != r) {
    throw_user_error(node.describe(), ": output_shape has ", output_shape.size(), " values, expected ", r);
  }
  const std::string auto_pad = node.attrs.get_string_or("auto_pad", "NOTSET");
  g.output.resize(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t extent = (g.kernel[d] - 1) * g.dilation[d] + 1;
    const int64_t full = g.stride[d] * (g.input[d] - 1) + output_padding[d] + extent;
    if (!output_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t target = !output_shape.empty() ? output_shape[d] : g.input[d] * g.stride[d];
      const int64_t total = std::max<int64_t>(0, full - target);
      const int64_t small = total / 2;
      // SAME_UPPER puts the larger half of the cut at the end (ONNX's ConvTranspose definition).
      g.pad_begin[d] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pad_end[d] = total - g.pad_begin[d];
      g.output[d] = target;
      continue;
    }
    if (auto_pad == "VALID") {
      g.pad_begin[d] = g.pad_end[d] = 0;
    } else if (auto_pad != "NOTSET") {
      throw_user_error(node.describe(), ": auto_pad '", auto_pad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
    g.output[d] = full - g.pad_begin[d] - g.pad_end[d];
    if (g.output[d] <= 0) throw_user_error(node.describe(), ": output size ", g.output[d], " at spatial dim ", d, " is not positive");
  }
  return g;
}

}  // namespace tessera
