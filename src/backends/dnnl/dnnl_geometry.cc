// Pooling and deconvolution geometry for oneDNN (see dnnl_geometry.h): the
// ir's window arithmetic (ir/window_geometry.h) plus the end padding that
// oneDNN's floor rule needs to give the output size the graph holds.
#include "backends/dnnl/dnnl_geometry.h"

#include <algorithm>

#include "backends/dnnl/dnnl_op_tables.h"
#include "ir/window_geometry.h"

namespace tessera::dnnl_backend {

PoolingGeometry pooling_geometry(const Graph& graph, const Node& node) {
  PoolingGeometry geometry;
  const std::vector<int64_t>& in = graph.value(node.inputs[0]).type.dims;
  const std::vector<int64_t>& out = graph.value(node.outputs[0]).type.dims;
  if (in.size() < 3 || in.size() > 5 || out.size() != in.size()) {
    geometry.refusal = "input of rank " + std::to_string(in.size()) + "; oneDNN pools 1-D to 3-D (rank 3 to 5)";
    return geometry;
  }
  const size_t n = in.size() - 2;
  const PoolingOp* row = node.domain.empty() ? find_pooling_op(node.op_type) : nullptr;
  if (row && row->global) {
    geometry.kernel.assign(in.begin() + 2, in.end());
    geometry.strides.assign(n, 1);
    geometry.dilations.assign(n, 1);
    geometry.pad_begin.assign(n, 0);
    geometry.pad_end.assign(n, 0);
    return geometry;
  }
  geometry.kernel = node.attrs.get_ints_or("kernel_shape", {});
  geometry.strides = node.attrs.get_ints_or("strides", std::vector<int64_t>(n, 1));
  geometry.dilations = node.attrs.get_ints_or("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads = node.attrs.get_ints_or("pads", std::vector<int64_t>(2 * n, 0));
  if (geometry.kernel.size() != n || geometry.strides.size() != n || geometry.dilations.size() != n || pads.size() != 2 * n) {
    geometry.refusal = "kernel_shape, strides, dilations or pads do not have one value per spatial dim";
    return geometry;
  }
  const bool ceil_mode = node.attrs.get_int_or("ceil_mode", 0) != 0;
  geometry.include_padding =
      row && row->include_padding_attribute && node.attrs.get_int_or(row->include_padding_attribute, 0) != 0;
  const std::string auto_pad = node.attrs.get_string_or("auto_pad", "NOTSET");
  const std::optional<AutoPad> mode = parse_auto_pad(auto_pad);
  geometry.pad_begin.assign(n, 0);
  geometry.pad_end.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = geometry.kernel[i], s = geometry.strides[i], d = geometry.dilations[i];
    if (k < 1 || s < 1 || d < 1) {
      geometry.refusal = "kernel_shape, strides and dilations must be positive";
      return geometry;
    }
    const int64_t extent = window_extent(k, d);
    const int64_t x = in[i + 2], y = out[i + 2];
    int64_t requested_end;
    if (mode == AutoPad::kNotSet) {
      geometry.pad_begin[i] = pads[i];
      requested_end = pads[n + i];
    } else if (mode == AutoPad::kValid) {
      requested_end = 0;
    } else if (mode == AutoPad::kSameUpper || mode == AutoPad::kSameLower) {
      // The padding that gives the graph's output size (ceil(x / s) for SAME).
      const AxisPadding same = same_padding(x, y, s, extent, mode == AutoPad::kSameUpper);
      geometry.pad_begin[i] = same.begin;
      requested_end = same.end;
    } else {
      geometry.refusal = "auto_pad '" + auto_pad + "' is unknown";
      return geometry;
    }
    if (geometry.pad_begin[i] < 0 || requested_end < 0) {
      geometry.refusal = "negative padding";
      return geometry;
    }
    // The end padding that oneDNN's floor rule needs for ONNX's output size:
    // more than requested only under ceil_mode; where less would do (floor
    // mode leaving input unread), the requested one gives the same size.
    const int64_t end = std::max(requested_end, (y - 1) * s + extent - x - geometry.pad_begin[i]);
    // Windows read only padding when they start past the input (ceil_mode's
    // last window may); ONNX drops such windows, so the output would differ.
    if ((y - 1) * s >= x + geometry.pad_begin[i] || geometry.pad_begin[i] >= extent || end >= extent) {
      geometry.refusal = "a window lies entirely in the padding";
      return geometry;
    }
    if (end > requested_end) {
      if (!ceil_mode) {
        geometry.refusal = "the output is larger than the pads give";
        return geometry;
      }
      // ceil_mode's extra end padding is counted by count_include_pad = 1 in
      // oneDNN but not in ONNX: only the exact case (no extra padding) runs.
      if (geometry.include_padding) {
        geometry.refusal = "ceil_mode with count_include_pad = 1 where the last window is partial";
        return geometry;
      }
    }
    geometry.pad_end[i] = end;
  }
  return geometry;
}

DeconvolutionGeometry deconvolution_geometry(const Graph& graph, const Node& node) {
  DeconvolutionGeometry geometry;
  const std::vector<int64_t>& x = graph.value(node.inputs[0]).type.dims;
  const std::vector<int64_t>& w = graph.value(node.inputs[1]).type.dims;
  const std::vector<int64_t>& y = graph.value(node.outputs[0]).type.dims;
  if (x.size() < 3 || w.size() != x.size() || y.size() != x.size()) {
    geometry.refusal = "weights or output of another rank than the input";
    return geometry;
  }
  if (node.attrs.has("output_shape")) {
    geometry.refusal = "output_shape is given";
    return geometry;
  }
  const std::string auto_pad = node.attrs.get_string_or("auto_pad", "NOTSET");
  if (parse_auto_pad(auto_pad) != AutoPad::kNotSet) {
    geometry.refusal = "auto_pad = " + auto_pad;
    return geometry;
  }
  const size_t n = x.size() - 2;
  geometry.strides = node.attrs.get_ints_or("strides", std::vector<int64_t>(n, 1));
  geometry.dilations = node.attrs.get_ints_or("dilations", std::vector<int64_t>(n, 1));
  const std::vector<int64_t> pads = node.attrs.get_ints_or("pads", std::vector<int64_t>(2 * n, 0));
  if (geometry.strides.size() != n || geometry.dilations.size() != n || pads.size() != 2 * n) {
    geometry.refusal = "strides, dilations or pads do not have one value per spatial dim";
    return geometry;
  }
  geometry.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(n));
  geometry.pad_end.resize(n);
  for (size_t i = 0; i < n; ++i) {
    // out = (in - 1) * stride + extent - begin - end: the end padding that gives
    // the graph's output size; output_padding beyond it would need a negative one.
    const int64_t extent = window_extent(w[i + 2], geometry.dilations[i]);
    geometry.pad_end[i] = (x[i + 2] - 1) * geometry.strides[i] + extent - geometry.pad_begin[i] - y[i + 2];
    if (geometry.pad_end[i] < 0 || geometry.pad_begin[i] < 0) {
      geometry.refusal = "output_padding larger than the end padding";
      return geometry;
    }
  }
  return geometry;
}

std::vector<int64_t> convolution_step_ints(const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
                                           const std::vector<int64_t>& pad_begin, const std::vector<int64_t>& pad_end) {
  std::vector<int64_t> ints = strides;
  for (int64_t d : dilations) ints.push_back(d - 1);  // oneDNN counts dilation from 0
  ints.insert(ints.end(), pad_begin.begin(), pad_begin.end());
  ints.insert(ints.end(), pad_end.begin(), pad_end.end());
  return ints;
}

std::vector<int64_t> grouped_weight_dims(const std::vector<int64_t>& w_dims, int64_t group) {
  if (group == 1) return w_dims;
  std::vector<int64_t> dims = {group, w_dims[0] / group};
  dims.insert(dims.end(), w_dims.begin() + 1, w_dims.end());
  return dims;
}

}  // namespace tessera::dnnl_backend
