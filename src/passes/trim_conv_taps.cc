// See trim_conv_taps.h.
#include "passes/trim_conv_taps.h"

#include <cmath>
#include <cstring>

#include "ir/window_geometry.h"

namespace tessera {
namespace {

/// Whether tap k of an axis reads the input (not padding) for some output position.
bool tap_reads_input(const WindowGeometry& g, size_t axis, int64_t k) {
  for (int64_t o = 0; o < g.output[axis]; ++o) {
    const int64_t i = o * g.stride[axis] - g.pad_begin[axis] + k * g.dilation[axis];
    if (i >= 0 && i < g.input[axis]) return true;
  }
  return false;
}

/// Whether some weight of taps [lo, hi) of `axis` is NaN or Inf (0 * NaN is NaN: such a tap stays).
bool taps_have_non_finite(const Tensor& w, size_t axis, int64_t lo, int64_t hi) {
  if (w.dtype() != DType::kFloat32) return true;  // only float32 weights are trimmed
  const Shape& s = w.shape();
  int64_t inner = 1;
  for (size_t d = axis + 3; d < s.size(); ++d) inner *= s[d];
  const int64_t outer = w.numel() / (s[axis + 2] * inner);
  const float* data = w.as<float>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = lo; k < hi; ++k) {
      for (int64_t i = 0; i < inner; ++i) {
        if (!std::isfinite(data[(o * s[axis + 2] + k) * inner + i])) return true;
      }
    }
  }
  return false;
}

/// w with only taps [lo[a], hi[a]] of each spatial axis a.
Tensor slice_taps(const Tensor& w, const std::vector<int64_t>& lo, const std::vector<int64_t>& hi) {
  Shape shape = w.shape();
  for (size_t a = 0; a < lo.size(); ++a) shape[a + 2] = hi[a] - lo[a] + 1;
  Tensor out(w.dtype(), shape);
  const size_t element = dtype_size(w.dtype());
  const size_t rank = shape.size();
  std::vector<int64_t> index(rank, 0);
  const auto* src = static_cast<const char*>(w.data());
  auto* dst = static_cast<char*>(out.data());
  for (int64_t n = 0; n < out.numel(); ++n) {
    int64_t offset = 0;
    for (size_t d = 0; d < rank; ++d) offset = offset * w.shape()[d] + index[d] + (d >= 2 ? lo[d - 2] : 0);
    std::memcpy(dst + static_cast<size_t>(n) * element, src + static_cast<size_t>(offset) * element, element);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> trim_conv_taps(Graph& graph) {
  std::vector<std::string> trimmed;
  for (Node& node : graph.nodes) {
    if (node.op_type != "Conv" || !node.domain.empty() || node.inputs.size() < 2 || !node.has_input(0) ||
        !node.has_input(1) || !graph.is_constant(node.inputs[1])) {
      continue;
    }
    const TensorType& x = graph.value(node.inputs[0]).type;
    const Tensor& w = *graph.value(node.inputs[1]).constant;
    if (!x.is_static() || x.dims.size() < 3 || w.shape().size() != x.dims.size()) continue;
    const size_t spatial = x.dims.size() - 2;
    const std::vector<int64_t> input(x.dims.begin() + 2, x.dims.end());
    const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
    WindowGeometry g;
    try {
      g = window_geometry(node, input, kernel, /*allow_ceil_mode=*/false);
    } catch (const std::exception&) {
      continue;  // the node's own checks report bad attributes
    }
    if (g.rank() != spatial || g.output_size() <= 0) continue;
    std::vector<int64_t> lo(spatial), hi(spatial);
    std::vector<int64_t> pad_begin = g.pad_begin, pad_end = g.pad_end;
    bool changed = false;
    for (size_t a = 0; a < spatial; ++a) {
      lo[a] = 0;
      hi[a] = kernel[a] - 1;
      while (lo[a] <= hi[a] && !tap_reads_input(g, a, lo[a])) ++lo[a];
      while (hi[a] >= lo[a] && !tap_reads_input(g, a, hi[a])) --hi[a];
      const int64_t begin = g.pad_begin[a] - lo[a] * g.dilation[a];
      const int64_t end = g.pad_end[a] - (kernel[a] - 1 - hi[a]) * g.dilation[a];
      if (lo[a] > hi[a] || begin < 0 || end < 0 || taps_have_non_finite(w, a, 0, lo[a]) ||
          taps_have_non_finite(w, a, hi[a] + 1, kernel[a])) {
        lo[a] = 0;  // leave this axis as it is
        hi[a] = kernel[a] - 1;
        continue;
      }
      if (lo[a] > 0 || hi[a] < kernel[a] - 1) changed = true;
      pad_begin[a] = begin;
      pad_end[a] = end;
    }
    if (!changed) continue;
    std::vector<int64_t> pads(pad_begin), shape(spatial);
    pads.insert(pads.end(), pad_end.begin(), pad_end.end());
    for (size_t a = 0; a < spatial; ++a) shape[a] = hi[a] - lo[a] + 1;
    const ValueId sliced = graph.add_constant(graph.unique_value_name(graph.value(node.inputs[1]).name + "_trimmed"),
                                              slice_taps(w, lo, hi));
    node.inputs[1] = sliced;
    node.attrs.set("pads", Attribute::of_ints(pads));
    node.attrs.set("kernel_shape", Attribute::of_ints(shape));
    node.attrs.set("auto_pad", Attribute::of_string("NOTSET"));
    trimmed.push_back(node.name);
  }
  return trimmed;
}

}  // namespace tessera
