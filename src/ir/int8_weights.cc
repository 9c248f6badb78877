#include "ir/int8_weights.h"

namespace tessera {

bool dequantizes_int8_weights(const Graph& graph, const Node& node) {
  if (node.op_type != "DequantizeLinear" || !node.domain.empty() || node.inputs.size() < 2 || node.outputs.size() != 1) {
    return false;
  }
  const Value& w = graph.value(node.inputs[0]);
  if (!w.constant || w.constant->dtype() != DType::kInt8 || w.constant->shape().size() != 2 ||
      w.constant->numel() < kInt8WeightMinElements) {
    return false;
  }
  const int64_t n = w.constant->shape()[1];
  if (node.inputs[1] == kNoValue) return false;
  const Value& scale = graph.value(node.inputs[1]);
  if (!scale.constant || scale.constant->dtype() != DType::kFloat32) return false;
  const int64_t scales = scale.constant->numel();
  int64_t axis = node.attrs.get_int_or("axis", 1);
  if (axis < 0) axis += 2;
  if (scales != 1 && !(scale.constant->shape().size() == 1 && scales == n && axis == 1)) return false;
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

}  // namespace tessera
