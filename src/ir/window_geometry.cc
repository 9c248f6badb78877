// Window geometry of Conv, ConvTranspose and the pooling ops (see
// window_geometry.h): resolves auto_pad, pads, strides, dilations and
// ceil_mode into explicit per-dim values for shape inference, the native
// kernels and the oneDNN backend.
#include "ir/window_geometry.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/tensor.h"

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

std::optional<AutoPad> parse_auto_pad(const std::string& text) {
  if (text == "NOTSET" || text.empty()) return AutoPad::kNotSet;
  if (text == "SAME_UPPER") return AutoPad::kSameUpper;
  if (text == "SAME_LOWER") return AutoPad::kSameLower;
  if (text == "VALID") return AutoPad::kValid;
  return std::nullopt;
}

int64_t window_extent(int64_t kernel, int64_t dilation) { return (kernel - 1) * dilation + 1; }

AxisPadding split_padding(int64_t total, bool larger_half_at_end) {
  const int64_t small = total / 2;
  AxisPadding p;
  p.begin = larger_half_at_end ? small : total - small;
  p.end = total - p.begin;
  return p;
}

int64_t same_output_size(int64_t input, int64_t stride) { return ceil_div(input, stride); }

AxisPadding same_padding(int64_t input, int64_t output, int64_t stride, int64_t extent, bool upper) {
  return split_padding(std::max<int64_t>(0, (output - 1) * stride + extent - input), upper);
}

int64_t WindowGeometry::output_size() const { return shape_numel(output); }
int64_t WindowGeometry::input_size() const { return shape_numel(input); }
int64_t WindowGeometry::kernel_size() const { return shape_numel(kernel); }

WindowGeometry3 as_three_dims(const WindowGeometry& g) {
  WindowGeometry3 s;
  s.rank = g.rank();
  if (s.rank > 3) throw_internal_error("as_three_dims: ", s.rank, " spatial dims");
  const size_t lead = 3 - s.rank;
  for (size_t d = 0; d < s.rank; ++d) {
    s.in[lead + d] = g.input[d];
    s.out[lead + d] = g.output[d];
    s.kernel[lead + d] = g.kernel[d];
    s.stride[lead + d] = g.stride[d];
    s.dilation[lead + d] = g.dilation[d];
    s.pad[lead + d] = g.pad_begin[d];
    s.pad_end[lead + d] = g.pad_end[d];
  }
  return s;
}

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
  const std::optional<AutoPad> mode = parse_auto_pad(auto_pad);
  const bool ceil_mode = allow_ceil_mode && node.attrs.get_int_or("ceil_mode", 0) != 0;
  const size_t r = g.rank();
  g.output.resize(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t extent = window_extent(g.kernel[d], g.dilation[d]);
    if (mode == AutoPad::kSameUpper || mode == AutoPad::kSameLower) {
      g.output[d] = same_output_size(g.input[d], g.stride[d]);
      const AxisPadding p = same_padding(g.input[d], g.output[d], g.stride[d], extent, mode == AutoPad::kSameUpper);
      g.pad_begin[d] = p.begin;
      g.pad_end[d] = p.end;
      continue;
    }
    if (mode == AutoPad::kValid) {
      g.pad_begin[d] = g.pad_end[d] = 0;
    } else if (mode != AutoPad::kNotSet) {
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
  const std::optional<AutoPad> mode = parse_auto_pad(auto_pad);
  g.output.resize(r);
  for (size_t d = 0; d < r; ++d) {
    const int64_t extent = window_extent(g.kernel[d], g.dilation[d]);
    const int64_t full = g.stride[d] * (g.input[d] - 1) + output_padding[d] + extent;
    if (!output_shape.empty() || mode == AutoPad::kSameUpper || mode == AutoPad::kSameLower) {
      const int64_t target = !output_shape.empty() ? output_shape[d] : g.input[d] * g.stride[d];
      // SAME_UPPER puts the larger half of the cut at the end (ONNX's ConvTranspose definition).
      const AxisPadding p = split_padding(std::max<int64_t>(0, full - target), mode == AutoPad::kSameUpper);
      g.pad_begin[d] = p.begin;
      g.pad_end[d] = p.end;
      g.output[d] = target;
      continue;
    }
    if (mode == AutoPad::kValid) {
      g.pad_begin[d] = g.pad_end[d] = 0;
    } else if (mode != AutoPad::kNotSet) {
      throw_user_error(node.describe(), ": auto_pad '", auto_pad, "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
    }
    g.output[d] = full - g.pad_begin[d] - g.pad_end[d];
    if (g.output[d] <= 0) throw_user_error(node.describe(), ": output size ", g.output[d], " at spatial dim ", d, " is not positive");
  }
  return g;
}

}  // namespace tessera
