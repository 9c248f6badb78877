// Patterns shared by several backends (see common_patterns.h).
#include "partition/common_patterns.h"

#include <cmath>

namespace tessera {
namespace {

Pattern checked(Pattern p, const NodeCheck& check) {
  if (check) p.where(check);
  return p;
}

/// ReduceMean over the last axis only, keeping it (axes given as a constant input).
bool reduces_last_axis(const Graph& graph, const Node& node) {
  if (node.attrs.get_int_or("keepdims", 1) != 1 || !node.has_input(1) || !graph.is_constant(node.inputs[1])) return false;
  const std::vector<int64_t> axes = graph.value(node.inputs[1]).constant->to_int64_vector();
  const int64_t rank = graph.value(node.inputs[0]).type.rank();
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

/// One operand is a 1-D constant of the last axis's size (as LayerNormalization's Scale and B are).
bool constant_over_last_axis(const Graph& graph, const Node& node) {
  const TensorType& y = graph.value(node.outputs[0]).type;
  if (!y.rank_known || y.dims.empty()) return false;
  for (ValueId in : node.inputs) {
    if (!graph.is_constant(in)) continue;
    const Shape& d = graph.value(in).type.dims;
    if (d.size() == 1 && d[0] == y.dims.back()) return true;
  }
  return false;
}

/// The body value a node produces, and the index among the body's inputs of a value.
std::optional<size_t> input_index(const Graph& body, ValueId id) {
  for (size_t i = 0; i < body.inputs.size(); ++i) {
    if (body.inputs[i] == id) return i;
  }
  return std::nullopt;
}

const Node* producer(const Graph& body, ValueId id) {
  for (const Node& n : body.nodes) {
    for (ValueId out : n.outputs) {
      if (out == id) return &n;
    }
  }
  return nullptr;
}

/// The operand of a two-input node that is not `chain`.
ValueId other_operand(const Node& node, ValueId chain) {
  if (node.inputs.size() != 2) return kNoValue;
  return node.inputs[0] == chain ? node.inputs[1] : node.inputs[0];
}

}  // namespace

Pattern gelu_erf_pattern(Pattern x, const NodeCheck& check) {
  // float32 rounds √2 to 1.4142135; exporters write it in double.
  Pattern divide = checked(op("Div", {x, scalar(std::sqrt(2.0), 1e-5)}), check);
  Pattern erf = checked(op("Erf", {divide}), check);
  Pattern plus_one = checked(op("Add", {erf, scalar(1.0)}), check);
  Pattern times_x = checked(op("Mul", {x, plus_one}), check);
  return checked(op("Mul", {times_x, scalar(0.5)}), check);
}

Pattern layer_norm_pattern(Pattern x, const NodeCheck& check) {
  Pattern mean = checked(op("ReduceMean", {x, constant()}), check);
  mean.where(reduces_last_axis);
  Pattern centred = checked(op("Sub", {x, mean}), check);
  Pattern squared = checked(op("Pow", {centred, scalar(2.0)}), check);
  Pattern variance = checked(op("ReduceMean", {squared, constant()}), check);
  variance.where(reduces_last_axis);
  Pattern shifted = checked(op("Add", {variance, scalar(0.0, 1e30)}), check);  // epsilon: any scalar constant
  Pattern deviation = checked(op("Sqrt", {shifted}), check);
  Pattern normalised = checked(op("Div", {centred, deviation}), check);
  Pattern scaled = checked(op("Mul", {normalised, constant()}), check);
  scaled.where(constant_over_last_axis);
  Pattern result = checked(op("Add", {scaled, constant()}), check);
  result.where(constant_over_last_axis);
  return result;
}

std::optional<LayerNormParts> parse_layer_norm_body(const Graph& body) {
  if (body.outputs.size() != 1) return std::nullopt;
  const Node* add = producer(body, body.outputs[0]);
  if (!add || add->op_type != "Add") return std::nullopt;
  const Node* mul = nullptr;
  for (ValueId in : add->inputs) {
    const Node* p = producer(body, in);
    if (p && p->op_type == "Mul") mul = p;
  }
  if (!mul) return std::nullopt;
  const Node* div = nullptr;
  for (ValueId in : mul->inputs) {
    const Node* p = producer(body, in);
    if (p && p->op_type == "Div") div = p;
  }
  if (!div || div->inputs.size() != 2) return std::nullopt;
  const Node* sub = producer(body, div->inputs[0]);
  const Node* sqrt = producer(body, div->inputs[1]);
  if (!sub || sub->op_type != "Sub" || !sqrt || sqrt->op_type != "Sqrt") return std::nullopt;
  const Node* add_eps = producer(body, sqrt->inputs[0]);
  if (!add_eps || add_eps->op_type != "Add") return std::nullopt;
  const Node* variance = nullptr;
  for (ValueId in : add_eps->inputs) {
    const Node* p = producer(body, in);
    if (p && p->op_type == "ReduceMean") variance = p;
  }
  if (!variance) return std::nullopt;
  const std::optional<size_t> x = input_index(body, sub->inputs[0]);
  const std::optional<size_t> scale = input_index(body, other_operand(*mul, div->outputs[0]));
  const std::optional<size_t> bias = input_index(body, other_operand(*add, mul->outputs[0]));
  const std::optional<size_t> epsilon = input_index(body, other_operand(*add_eps, variance->outputs[0]));
  if (!x || !scale || !bias || !epsilon) return std::nullopt;
  return LayerNormParts{*x, *scale, *bias, *epsilon};
}

}  // namespace tessera
