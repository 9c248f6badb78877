#include "passes/shape_values.h"

#include <algorithm>
#include <string>

#include "ir/error.h"

namespace tessera {
namespace {

bool is_shape_dtype(DType dtype) { return dtype == DType::kInt64 || dtype == DType::kInt32; }

/// A tensor type the tracker follows: int32/int64, rank 0 or 1.
bool is_tracked_type(const TensorType& t) {
  return t.is_tensor() && is_shape_dtype(t.dtype) && t.rank_known && t.rank() <= 1;
}

int64_t as_dtype(DType dtype, int64_t v) { return dtype == DType::kInt32 ? static_cast<int32_t>(v) : v; }

/// The data inputs of an op whose every output element is a copy of one input element.
std::optional<std::vector<size_t>> moving_inputs(const Node& node) {
  static const char* const kFirstInputMoves[] = {"Gather", "Slice", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Expand", "Tile"};
  if (!node.domain.empty()) return std::nullopt;
  if (node.op_type == "Concat") {
    std::vector<size_t> all(node.inputs.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = i;
    return all;
  }
  for (const char* op : kFirstInputMoves) {
    if (node.op_type == op) return std::vector<size_t>{0};
  }
  return std::nullopt;
}

}  // namespace

std::optional<ShapeValues::Partial> ShapeValues::get(const Graph& graph, ValueId id) const {
  if (id == kNoValue) return std::nullopt;
  if (graph.is_constant(id)) {
    const Tensor& t = *graph.value(id).constant;
    if (!is_shape_dtype(t.dtype()) || t.shape().size() > 1 || t.numel() > kMaxShapeValueElements) return std::nullopt;
    Partial p{t.dtype(), t.shape(), {}};
    for (int64_t i = 0; i < t.numel(); ++i) p.elements.push_back(Element{.known = true, .value = t.int_at(i)});
    return p;
  }
  if (static_cast<size_t>(id) < recorded_.size()) return recorded_[static_cast<size_t>(id)];
  return std::nullopt;
}

std::optional<ShapeValues::Partial> ShapeValues::moved(const Graph& graph, const Node& node,
                                                       const std::vector<size_t>& data_inputs) const {
  // Each data input becomes a tensor of its elements' indices (numbered across inputs); every other
  // input must be a constant. The node run on them says where each output element comes from.
  std::vector<Element> sources;
  std::vector<Tensor> held(node.inputs.size());
  std::vector<const Tensor*> inputs(node.inputs.size(), nullptr);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue) continue;
    const bool data = std::find(data_inputs.begin(), data_inputs.end(), i) != data_inputs.end();
    if (!data) {
      if (!graph.is_constant(node.inputs[i])) return std::nullopt;
      inputs[i] = graph.value(node.inputs[i]).constant.get();
      continue;
    }
    std::optional<Partial> p = get(graph, node.inputs[i]);
    if (!p) return std::nullopt;
    held[i] = Tensor(DType::kInt64, p->dims);
    for (size_t k = 0; k < p->elements.size(); ++k) {
      held[i].as<int64_t>()[k] = static_cast<int64_t>(sources.size());
      sources.push_back(p->elements[k]);
    }
    inputs[i] = &held[i];
  }
  std::vector<Tensor> out;
  try {
    out = evaluate_(node, inputs);
  } catch (const Error&) {
    return std::nullopt;  // e.g. an index out of range: the run reports it
  }
  if (out.empty() || out[0].dtype() != DType::kInt64 || out[0].shape().size() > 1 ||
      out[0].numel() > kMaxShapeValueElements) {
    return std::nullopt;
  }
  Partial result{graph.value(node.outputs[0]).type.dtype, out[0].shape(), {}};
  for (int64_t k = 0; k < out[0].numel(); ++k) {
    const int64_t from = out[0].as<int64_t>()[k];
    if (from < 0 || from >= static_cast<int64_t>(sources.size())) return std::nullopt;
    Element e = sources[static_cast<size_t>(from)];
    if (e.known) e.value = as_dtype(result.dtype, e.value);
    result.elements.push_back(e);
  }
  return result;
}

std::optional<ShapeValues::Partial> ShapeValues::arithmetic(const Graph& graph, const Node& node) const {
  if (node.inputs.size() != 2) return std::nullopt;
  std::optional<Partial> a = get(graph, node.inputs[0]);
  std::optional<Partial> b = get(graph, node.inputs[1]);
  if (!a || !b) return std::nullopt;
  const size_t na = a->elements.size(), nb = b->elements.size();
  if (na != nb && na != 1 && nb != 1) return std::nullopt;
  const size_t n = std::max(na, nb);
  Partial result{graph.value(node.outputs[0]).type.dtype, a->dims.size() >= b->dims.size() ? a->dims : b->dims, {}};
  if (result.dims.size() == 1) result.dims[0] = static_cast<int64_t>(n);
  const std::string& op = node.op_type;
  for (size_t i = 0; i < n; ++i) {
    const Element& x = a->elements[na == 1 ? 0 : i];
    const Element& y = b->elements[nb == 1 ? 0 : i];
    Element r;
    if (x.known && y.known) {
      int64_t v = 0;
      bool ok = true;
      if (op == "Add") ok = !__builtin_add_overflow(x.value, y.value, &v);
      if (op == "Sub") ok = !__builtin_sub_overflow(x.value, y.value, &v);
      if (op == "Mul") ok = !__builtin_mul_overflow(x.value, y.value, &v);
      // Integer division is left to the run where a sign could make truncation and flooring differ.
      if (op == "Div") ok = x.value >= 0 && y.value > 0 && (v = x.value / y.value, true);
      if (ok && as_dtype(result.dtype, v) == v) r = Element{.known = true, .value = v};
    } else if (!x.known && y.known) {
      const bool identity = (y.value == 1 && (op == "Mul" || op == "Div")) || (y.value == 0 && (op == "Add" || op == "Sub"));
      if (identity) r = x;
    } else if (x.known && !y.known) {
      const bool identity = (x.value == 1 && op == "Mul") || (x.value == 0 && op == "Add");
      if (identity) r = y;
    }
    result.elements.push_back(r);
  }
  return result;
}

std::optional<Tensor> ShapeValues::observe(const Graph& graph, const Node& node) {
  if (node.outputs.size() != 1 || node.outputs[0] == kNoValue || !node.domain.empty()) return std::nullopt;
  const TensorType& out_type = graph.value(node.outputs[0]).type;
  if (!is_tracked_type(out_type)) return std::nullopt;
  std::optional<Partial> result;
  if (node.op_type == "Shape" && node.has_input(0)) {
    const TensorType& in = graph.value(node.inputs[0]).type;
    if (!in.is_tensor() || !in.rank_known) return std::nullopt;
    const int64_t rank = in.rank();
    auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
    const int64_t start = clamp(node.attrs.get_int_or("start", 0));
    const int64_t end = clamp(node.attrs.get_int_or("end", rank));
    result = Partial{DType::kInt64, {std::max<int64_t>(end - start, 0)}, {}};
    for (int64_t d = start; d < end; ++d) {
      const int64_t dim = in.dims[static_cast<size_t>(d)];
      result->elements.push_back(dim >= 0 ? Element{.known = true, .value = dim}
                                          : Element{.source = node.inputs[0], .dim = d});
    }
  } else if ((node.op_type == "Identity" || node.op_type == "Cast") && node.has_input(0)) {
    result = get(graph, node.inputs[0]);
    if (result) {
      result->dtype = out_type.dtype;
      for (Element& e : result->elements) {
        if (e.known && as_dtype(result->dtype, e.value) != e.value) e = Element{};
      }
    }
  } else if (std::optional<std::vector<size_t>> data = moving_inputs(node)) {
    result = moved(graph, node, *data);
  } else if (node.op_type == "Add" || node.op_type == "Sub" || node.op_type == "Mul" || node.op_type == "Div") {
    result = arithmetic(graph, node);
  }
  if (!result || result->dims.size() != static_cast<size_t>(out_type.rank())) return std::nullopt;
  if (out_type.rank() == 1 && out_type.dims[0] >= 0 && out_type.dims[0] != result->dims[0]) return std::nullopt;
  const bool all_known = std::all_of(result->elements.begin(), result->elements.end(), [](const Element& e) { return e.known; });
  if (all_known) {
    Tensor t(result->dtype, result->dims);
    for (size_t k = 0; k < result->elements.size(); ++k) {
      if (result->dtype == DType::kInt32) {
        t.as<int32_t>()[k] = static_cast<int32_t>(result->elements[k].value);
      } else {
        t.as<int64_t>()[k] = result->elements[k].value;
      }
    }
    return t;
  }
  if (recorded_.size() <= static_cast<size_t>(node.outputs[0])) recorded_.resize(static_cast<size_t>(node.outputs[0]) + 1);
  recorded_[static_cast<size_t>(node.outputs[0])] = std::move(result);
  return std::nullopt;
}

bool ShapeValues::give_reshape_a_constant_target(Graph& graph, Node& node) {
  if (node.op_type != "Reshape" || !node.domain.empty() || !node.has_input(0) || !node.has_input(1) ||
      graph.is_constant(node.inputs[1])) {
    return false;
  }
  std::optional<Partial> target = get(graph, node.inputs[1]);
  if (!target || target->dims.size() != 1) return false;
  const bool allow_zero = node.attrs.get_int_or("allowzero", 0) != 0;
  // 0 copies the input's dim at that position; -1 takes what the other dims leave, which is the
  // element's own value only where every other one is a known positive number.
  std::vector<int64_t> values;
  int unknown = -1, copies = 0, inferred = 0;
  bool all_positive = true;
  for (size_t k = 0; k < target->elements.size(); ++k) {
    const Element& e = target->elements[k];
    if (e.known) {
      values.push_back(e.value);
      inferred += e.value == -1;
      all_positive &= e.value > 0;
    } else if (!allow_zero && e.source == node.inputs[0] && e.dim == static_cast<int64_t>(k)) {
      values.push_back(0);
      ++copies;
    } else {
      if (unknown >= 0) return false;
      unknown = static_cast<int>(k);
      values.push_back(-1);
    }
  }
  if (unknown >= 0 && (copies > 0 || inferred > 0 || !all_positive)) return false;
  Tensor shape(DType::kInt64, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), shape.as<int64_t>());
  node.inputs[1] = graph.add_constant(graph.unique_value_name(node.name + "_target"), std::move(shape));
  return true;
}

}  // namespace tessera
