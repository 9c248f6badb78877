// Window geometry of Conv, ConvTranspose and the pooling ops: how ONNX's
// auto_pad (NOTSET, SAME_UPPER, SAME_LOWER, VALID), pads, strides,
// dilations and ceil_mode become explicit per-dim paddings and output sizes.
// The one place this arithmetic lives: shape inference (src/ir/ops), the
// native kernels and the oneDNN backend's declarations and lowering all read
// it, so they agree on every pad and output size.
//
// Contract: pure functions of the node's attributes and the spatial sizes
// they are given. window_geometry and conv_transpose_geometry throw a user
// error naming the node on bad attributes; the per-axis helpers never throw.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

/// ONNX's auto_pad text ("" counts as NOTSET); nullopt for any other text.
std::optional<AutoPad> parse_auto_pad(const std::string& text);

/// The span of input one window covers: (kernel - 1) * dilation + 1.
int64_t window_extent(int64_t kernel, int64_t dilation);

/// Begin and end padding of one spatial axis.
struct AxisPadding {
  int64_t begin = 0;
  int64_t end = 0;
};

/// `total` padding split in two; `larger_half_at_end` (SAME_UPPER) puts the
/// odd element at the end, otherwise (SAME_LOWER) at the beginning.
AxisPadding split_padding(int64_t total, bool larger_half_at_end);

/// The output size SAME_UPPER and SAME_LOWER give: ceil(input / stride).
int64_t same_output_size(int64_t input, int64_t stride);

/// SAME_UPPER / SAME_LOWER padding of one axis: the least total (never
/// negative) with which `output` windows of `extent`, `stride` apart, fit in
/// the padded input, split by split_padding.
AxisPadding same_padding(int64_t input, int64_t output, int64_t stride, int64_t extent, bool upper);

/// Sliding-window geometry over the spatial dims of an NC... tensor.
struct WindowGeometry {
  std::vector<int64_t> input;      // spatial input sizes
  std::vector<int64_t> kernel;     // kernel sizes
  std::vector<int64_t> stride;
  std::vector<int64_t> dilation;
  std::vector<int64_t> pad_begin;
  std::vector<int64_t> pad_end;
  std::vector<int64_t> output;     // spatial output sizes
  size_t rank() const { return input.size(); }
  int64_t output_size() const;     // product of output
  int64_t input_size() const;      // product of input
  int64_t kernel_size() const;     // product of kernel
};

/// A geometry of at most three spatial dims as exactly three (D, H, W): the
/// missing leading dims have size 1, stride and dilation 1 and no padding.
/// The form the native convolution and pooling kernels walk.
struct WindowGeometry3 {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kernel[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dilation[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, pad_end[3] = {0, 0, 0};
  size_t rank = 0;  // spatial dims of the geometry it was made from
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_size() const { return kernel[0] * kernel[1] * kernel[2]; }
};

/// `g` as three spatial dims; `g.rank()` must be at most 3 (callers refuse
/// more with a message naming the node).
WindowGeometry3 as_three_dims(const WindowGeometry& g);

/// Geometry of Conv / MaxPool / AveragePool / LpPool (and the integer
/// convolutions) from the node's attributes (auto_pad, pads, strides,
/// dilations, ceil_mode when `allow_ceil_mode`) and the spatial input and
/// kernel sizes. Throws a user error naming the node on bad values.
WindowGeometry window_geometry(const Node& node, const std::vector<int64_t>& input_spatial,
                               const std::vector<int64_t>& kernel_spatial, bool allow_ceil_mode);

/// Geometry of ConvTranspose: `input` is the ConvTranspose input, `output` the
/// larger result; pads are those of the equivalent forward convolution.
WindowGeometry conv_transpose_geometry(const Node& node, const std::vector<int64_t>& input_spatial,
                                       const std::vector<int64_t>& kernel_spatial);

}  // namespace tessera
