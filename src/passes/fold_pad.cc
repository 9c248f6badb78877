// See fold_pad.h.
#include "passes/fold_pad.h"

#include <algorithm>
#include <optional>

namespace tessera {
namespace {

/// The Pad's spatial pads (begins then ends, spatial dims only) when it pads
/// N and C by nothing, with zeros, in constant mode; else nullopt.
std::optional<std::vector<int64_t>> zero_spatial_pads(const Graph& graph, const Node& pad) {
  if (pad.op_type != "Pad" || !pad.domain.empty() || pad.inputs.empty() || !pad.has_input(0) || pad.outputs.size() != 1) {
    return std::nullopt;
  }
  if (pad.attrs.get_string_or("mode", "constant") != "constant") return std::nullopt;
  const TensorType& x = graph.value(pad.inputs[0]).type;
  if (!x.is_tensor() || !x.rank_known || x.dims.size() < 3 || !dtype_is_float(x.dtype)) return std::nullopt;
  std::vector<int64_t> pads;
  if (pad.attrs.find("pads")) {  // opset 1-10: attributes
    pads = pad.attrs.get_ints_or("pads", {});
    if (pad.attrs.get_float_or("value", 0.0f) != 0.0f) return std::nullopt;
  } else {
    if (!pad.has_input(1) || !graph.is_constant(pad.inputs[1])) return std::nullopt;
    const Tensor& p = *graph.value(pad.inputs[1]).constant;
    for (int64_t i = 0; i < p.numel(); ++i) pads.push_back(static_cast<int64_t>(p.double_at(i)));
    if (pad.has_input(2)) {  // constant_value
      if (!graph.is_constant(pad.inputs[2])) return std::nullopt;
      const Tensor& v = *graph.value(pad.inputs[2]).constant;
      if (v.numel() != 1 || v.double_at(0) != 0.0) return std::nullopt;
    }
    if (pad.has_input(3)) return std::nullopt;  // axes (opset 18)
  }
  const size_t rank = x.dims.size();
  if (pads.size() != 2 * rank) return std::nullopt;
  for (int64_t p : pads) {
    if (p < 0) return std::nullopt;  // a crop
  }
  if (pads[0] || pads[1] || pads[rank] || pads[rank + 1]) return std::nullopt;  // N or C padded
  std::vector<int64_t> spatial(pads.begin() + 2, pads.begin() + static_cast<std::ptrdiff_t>(rank));
  spatial.insert(spatial.end(), pads.begin() + static_cast<std::ptrdiff_t>(rank) + 2, pads.end());
  return spatial;
}

/// Whether `reader` takes the Pad's zeros as its own padding (see fold_pad.h), reading it as input 0 only.
bool takes_padding(const Node& reader, ValueId padded, size_t spatial) {
  if (!reader.domain.empty() || reader.inputs.empty() || reader.inputs[0] != padded) return false;
  for (size_t i = 1; i < reader.inputs.size(); ++i) {
    if (reader.inputs[i] == padded) return false;
  }
  const std::string auto_pad = reader.attrs.get_string_or("auto_pad", "NOTSET");
  const std::vector<int64_t> own = reader.attrs.get_ints_or("pads", std::vector<int64_t>(2 * spatial, 0));
  if (own.size() != 2 * spatial) return false;
  if (reader.op_type == "Conv") return auto_pad == "NOTSET" || auto_pad == "VALID" || auto_pad.empty();
  if (reader.op_type == "AveragePool") {
    if (!(auto_pad == "NOTSET" || auto_pad == "VALID" || auto_pad.empty())) return false;
    if (reader.attrs.get_int_or("ceil_mode", 0) != 0) return false;
    return std::all_of(own.begin(), own.end(), [](int64_t p) { return p == 0; });
  }
  return false;
}

}  // namespace

std::vector<std::string> fold_pad(Graph& graph) {
  std::vector<std::string> folded;
  std::vector<std::vector<size_t>> readers(graph.values.size());
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (ValueId in : graph.nodes[n].inputs) {
      if (in != kNoValue) readers[static_cast<size_t>(in)].push_back(n);
    }
  }
  for (const Node& pad : graph.nodes) {
    const std::optional<std::vector<int64_t>> pads = zero_spatial_pads(graph, pad);
    if (!pads) continue;
    const ValueId padded = pad.outputs[0];
    if (padded == kNoValue || std::find(graph.outputs.begin(), graph.outputs.end(), padded) != graph.outputs.end()) continue;
    const size_t spatial = pads->size() / 2;
    std::vector<size_t>& users = readers[static_cast<size_t>(padded)];
    std::sort(users.begin(), users.end());
    users.erase(std::unique(users.begin(), users.end()), users.end());
    if (users.empty() || !std::all_of(users.begin(), users.end(), [&](size_t n) {
          return takes_padding(graph.nodes[n], padded, spatial);
        })) {
      continue;
    }
    for (size_t n : users) {
      Node& reader = graph.nodes[n];
      std::vector<int64_t> own = reader.attrs.get_ints_or("pads", std::vector<int64_t>(2 * spatial, 0));
      if (reader.attrs.get_string_or("auto_pad", "NOTSET") == "VALID") std::fill(own.begin(), own.end(), 0);
      for (size_t i = 0; i < own.size(); ++i) own[i] += (*pads)[i];
      reader.attrs.set("pads", Attribute::of_ints(own));
      reader.attrs.set("auto_pad", Attribute::of_string("NOTSET"));
      if (reader.op_type == "AveragePool") reader.attrs.set("count_include_pad", Attribute::of_int(1));
      reader.inputs[0] = pad.inputs[0];
    }
    folded.push_back(pad.name);
  }
  return folded;
}

}  // namespace tessera
