// Lowering of MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool to
// oneDNN's pooling_v2. The source keeps the layout its producer chose (a
// blocked Conv output stays blocked), and the destination layout is left
// to oneDNN, which picks the source's; ceil_mode becomes extra end padding.
#include <algorithm>

#include "backends/dnnl/dnnl_lowering.h"
#include "backends/dnnl/dnnl_pooling.h"
#include "ir/error.h"

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
  const bool global = node.op_type == "GlobalAveragePool" || node.op_type == "GlobalMaxPool";
  if (global) {
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
  geometry.include_padding = node.op_type == "AveragePool" && node.attrs.get_int_or("count_include_pad", 0) != 0;
  const std::string auto_pad = node.attrs.get_string_or("auto_pad", "NOTSET");
  geometry.pad_begin.assign(n, 0);
  geometry.pad_end.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t k = geometry.kernel[i], s = geometry.strides[i], d = geometry.dilations[i];
    if (k < 1 || s < 1 || d < 1) {
      geometry.refusal = "kernel_shape, strides and dilations must be positive";
      return geometry;
    }
    const int64_t extent = (k - 1) * d + 1;
    const int64_t x = in[i + 2], y = out[i + 2];
    // The end padding oneDNN's floor rule needs to give ONNX's output size.
    const int64_t total = std::max<int64_t>(0, (y - 1) * s + extent - x);
    int64_t requested_end;
    if (auto_pad == "NOTSET" || auto_pad.empty()) {
      geometry.pad_begin[i] = pads[i];
      requested_end = pads[n + i];
    } else if (auto_pad == "VALID") {
      requested_end = 0;
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      geometry.pad_begin[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      requested_end = total - geometry.pad_begin[i];
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

void lower_pooling(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  if (!fused.tail.empty()) lowering.unsupported(node, "nothing fuses into pooling");
  if (node.has_output(1)) lowering.unsupported(node, "the Indices output");
  const PoolingGeometry geometry = pooling_geometry(*fused.graph, node);
  if (!geometry.refusal.empty()) lowering.unsupported(node, geometry.refusal);
  const ValueId x = fused.region_value(node.inputs[0]);
  const std::vector<int64_t> y_dims = dims_of(lowering.graph(), fused.outputs[0]);

  Step step;
  step.kind = StepKind::kPooling;
  step.node = fused.region_node;
  const bool max = node.op_type == "MaxPool" || node.op_type == "GlobalMaxPool";
  step.algorithm = static_cast<int32_t>(max                        ? dnnl::algorithm::pooling_max
                                        : geometry.include_padding ? dnnl::algorithm::pooling_avg_include_padding
                                                                   : dnnl::algorithm::pooling_avg_exclude_padding);
  // ints: strides, kernel, dilations (from 0), begin paddings, end paddings.
  step.ints = geometry.strides;
  step.ints.insert(step.ints.end(), geometry.kernel.begin(), geometry.kernel.end());
  for (int64_t d : geometry.dilations) step.ints.push_back(d - 1);
  step.ints.insert(step.ints.end(), geometry.pad_begin.begin(), geometry.pad_begin.end());
  step.ints.insert(step.ints.end(), geometry.pad_end.begin(), geometry.pad_end.end());
  step.inputs = {lowering.slot_of(x)};
  lowering.add_step(std::move(step), {memory::desc()}, any_desc(y_dims), fused.outputs[0], y_dims);
}

}  // namespace tessera::dnnl_backend
