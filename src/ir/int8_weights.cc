#include "ir/int8_weights.h"

namespace tessera {
namespace {

/// The scales' axis: -1 for one scale, else 0 (per row) or 1 (per column).
int64_t scale_axis(const Graph& graph, const Node& dq) {
  const Value& scale = graph.value(dq.inputs[1]);
  if (scale.constant->numel() == 1) return -1;
  int64_t axis = dq.attrs.get_int_or("axis", 1);
  return axis < 0 ? axis + 2 : axis;
}

}  // namespace

bool dequantizes_int8_weights(const Graph& graph, const Node& node) {
  if (node.op_type != "DequantizeLinear" || !node.domain.empty() || node.inputs.size() < 2 || node.outputs.size() != 1) {
    return false;
  }
  const Value& w = graph.value(node.inputs[0]);
  if (!w.constant || w.constant->dtype() != DType::kInt8 || w.constant->shape().size() != 2 ||
      w.constant->numel() < kInt8WeightMinElements) {
    return false;
  }
  if (node.inputs[1] == kNoValue) return false;
  const Value& scale = graph.value(node.inputs[1]);
  if (!scale.constant || scale.constant->dtype() != DType::kFloat32) return false;
  const int64_t scales = scale.constant->numel();
  if (scales != 1) {
    int64_t axis = node.attrs.get_int_or("axis", 1);
    if (axis < 0) axis += 2;
    if (axis != 0 && axis != 1) return false;
    if (scale.constant->shape().size() != 1 || scales != w.constant->shape()[static_cast<size_t>(axis)]) return false;
  }
  for (int64_t i = 0; i < scales; ++i) {
    const float s = scale.constant->as<float>()[i];
    if (!(s > 0 && s < 3.0e38f)) return false;  // NaN, zero, negative or infinite scales: folded as written
  }
  if (node.has_input(2)) {
    const Value& zero = graph.value(node.inputs[2]);
    if (!zero.constant || zero.constant->dtype() != DType::kInt8) return false;
    for (int64_t i = 0; i < zero.constant->numel(); ++i) {
      if (zero.constant->as<int8_t>()[i] != 0) return false;
    }
  }
  return true;
}

bool reads_as_int8_weights(const Graph& graph, const Node& reader, const Node& dq) {
  if (!reader.domain.empty() || reader.inputs.size() < 2 || reader.inputs[1] != dq.outputs[0] ||
      reader.inputs[0] == dq.outputs[0]) {
    return false;
  }
  const int64_t axis = scale_axis(graph, dq);
  if (reader.op_type == "MatMul") return reader.inputs.size() == 2 && axis != 0;
  if (reader.op_type != "Gemm") return false;
  if (reader.attrs.get_float_or("alpha", 1.0f) != 1.0f || reader.attrs.get_int_or("transA", 0) != 0) return false;
  const bool trans_b = reader.attrs.get_int_or("transB", 0) != 0;
  if (axis == (trans_b ? 1 : 0)) return false;  // a scale per input channel
  if (!reader.has_input(2)) return true;
  const Value& c = graph.value(reader.inputs[2]);
  const Shape& w = graph.value(dq.inputs[0]).constant->shape();
  const int64_t n = trans_b ? w[0] : w[1];
  if (reader.attrs.get_float_or("beta", 1.0f) != 1.0f || !c.constant || c.constant->dtype() != DType::kFloat32) return false;
  const Shape& shape = c.constant->shape();
  return (shape.size() == 1 && shape[0] == n) || (shape.size() == 2 && shape[0] == 1 && shape[1] == n);
}

const Node* int8_weights_of(const Graph& graph, const Node& reader) {
  if (reader.inputs.size() < 2 || reader.inputs[1] == kNoValue) return nullptr;
  for (const Node& node : graph.nodes) {
    if (node.outputs.size() == 1 && node.outputs[0] == reader.inputs[1]) {
      return dequantizes_int8_weights(graph, node) && reads_as_int8_weights(graph, reader, node) ? &node : nullptr;
    }
  }
  return nullptr;
}

}  // namespace tessera
