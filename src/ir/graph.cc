#include "ir/graph.h"

#include <algorithm>

#include "ir/error.h"

namespace tessera {

const char* value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::kTensor: return "tensor";
    case ValueKind::kSequence: return "sequence";
    case ValueKind::kOptionalTensor: return "optional tensor";
    case ValueKind::kOptionalSequence: return "optional sequence";
  }
  return "?";
}

std::string value_kind_phrase(ValueKind kind) {
  const bool optional = kind == ValueKind::kOptionalTensor || kind == ValueKind::kOptionalSequence;
  return std::string(optional ? "an " : "a ") + value_kind_name(kind);
}

bool TensorType::is_static() const {
  if (kind != ValueKind::kTensor || !rank_known || dtype == DType::kUndefined) return false;
  for (int64_t d : dims) {
    if (d < 0) return false;
  }
  return true;
}

std::string TensorType::to_string() const {
  switch (kind) {
    case ValueKind::kTensor: break;
    case ValueKind::kSequence: return "sequence<" + element().to_string() + ">";
    case ValueKind::kOptionalTensor: return "optional<" + element().to_string() + ">";
    case ValueKind::kOptionalSequence: return "optional<sequence<" + element().to_string() + ">>";
  }
  std::string out = dtype_name(dtype);
  if (!rank_known) return out + "[?]";
  out += "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += "x";
    if (dims[i] >= 0) {
      out += std::to_string(dims[i]);
    } else if (i < symbols.size() && !symbols[i].empty()) {
      out += symbols[i];
    } else {
      out += "?";
    }
  }
  return out + "]";
}

TensorType TensorType::element() const {
  TensorType t = *this;
  t.kind = ValueKind::kTensor;
  return t;
}

TensorType TensorType::of_kind(ValueKind kind, const TensorType& element) {
  TensorType t = element;
  t.kind = kind;
  return t;
}

TensorType TensorType::make(DType dtype, Shape dims) {
  TensorType type;
  type.dtype = dtype;
  type.rank_known = true;
  type.dims = std::move(dims);
  return type;
}

std::vector<int64_t> encode_type_attribute(const TensorType& type) {
  std::vector<int64_t> out = {static_cast<int64_t>(type.kind), static_cast<int64_t>(type.dtype),
                              type.rank_known ? type.rank() : -1};
  if (type.rank_known) out.insert(out.end(), type.dims.begin(), type.dims.end());
  return out;
}

TensorType decode_type_attribute(const std::vector<int64_t>& ints, const std::string& where) {
  if (ints.size() < 3 || ints[0] < 0 || ints[0] > kLastValueKind || ints[1] < 0 ||
      ints[1] > static_cast<int64_t>(DType::kString) || ints[2] < -1 ||
      ints.size() != 3 + static_cast<size_t>(std::max<int64_t>(ints[2], 0))) {
    throw_user_error(where, ": malformed type attribute");
  }
  TensorType t;
  t.kind = static_cast<ValueKind>(ints[0]);
  t.dtype = static_cast<DType>(ints[1]);
  t.rank_known = ints[2] >= 0;
  for (size_t i = 3; i < ints.size(); ++i) {
    if (ints[i] < -1) throw_user_error(where, ": malformed type attribute (dimension ", ints[i], ")");
    t.dims.push_back(ints[i]);
  }
  return t;
}

const char* attribute_kind_name(Attribute::Kind kind) {
  switch (kind) {
    case Attribute::Kind::kInt: return "int";
    case Attribute::Kind::kFloat: return "float";
    case Attribute::Kind::kString: return "string";
    case Attribute::Kind::kInts: return "ints";
    case Attribute::Kind::kFloats: return "floats";
    case Attribute::Kind::kStrings: return "strings";
    case Attribute::Kind::kTensor: return "tensor";
    case Attribute::Kind::kGraph: return "graph";
  }
  return "?";
}

Attribute Attribute::of_int(int64_t v) { Attribute a; a.kind = Kind::kInt; a.i = v; return a; }
Attribute Attribute::of_float(float v) { Attribute a; a.kind = Kind::kFloat; a.f = v; return a; }
Attribute Attribute::of_string(std::string v) { Attribute a; a.kind = Kind::kString; a.s = std::move(v); return a; }
Attribute Attribute::of_ints(std::vector<int64_t> v) { Attribute a; a.kind = Kind::kInts; a.ints = std::move(v); return a; }
Attribute Attribute::of_floats(std::vector<float> v) { Attribute a; a.kind = Kind::kFloats; a.floats = std::move(v); return a; }
Attribute Attribute::of_tensor(Tensor v) {
  Attribute a;
  a.kind = Kind::kTensor;
  a.tensor = std::make_shared<Tensor>(std::move(v));
  return a;
}

const Attribute* AttributeMap::find(std::string_view name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

const Attribute& AttributeMap::get_checked(std::string_view name, Attribute::Kind kind) const {
  const Attribute* a = find(name);
  if (!a) throw_user_error("missing required attribute '", name, "'");
  if (a->kind != kind) {
    throw_user_error("attribute '", name, "' is ", attribute_kind_name(a->kind), ", expected ",
                     attribute_kind_name(kind));
  }
  return *a;
}

int64_t AttributeMap::get_int(std::string_view name) const { return get_checked(name, Attribute::Kind::kInt).i; }
int64_t AttributeMap::get_int_or(std::string_view name, int64_t fallback) const {
  return has(name) ? get_int(name) : fallback;
}
float AttributeMap::get_float(std::string_view name) const { return get_checked(name, Attribute::Kind::kFloat).f; }
float AttributeMap::get_float_or(std::string_view name, float fallback) const {
  return has(name) ? get_float(name) : fallback;
}
std::string AttributeMap::get_string_or(std::string_view name, const std::string& fallback) const {
  return has(name) ? get_checked(name, Attribute::Kind::kString).s : fallback;
}
std::vector<int64_t> AttributeMap::get_ints_or(std::string_view name, std::vector<int64_t> fallback) const {
  return has(name) ? get_checked(name, Attribute::Kind::kInts).ints : fallback;
}
std::vector<float> AttributeMap::get_floats_or(std::string_view name, std::vector<float> fallback) const {
  return has(name) ? get_checked(name, Attribute::Kind::kFloats).floats : fallback;
}
std::vector<std::string> AttributeMap::get_strings_or(std::string_view name,
                                                      std::vector<std::string> fallback) const {
  return has(name) ? get_checked(name, Attribute::Kind::kStrings).strings : fallback;
}

std::string Node::describe() const { return str_cat("node '", name, "' (", op_type, ")"); }

void Graph::refresh_index() const {
  if (indexed_count_ > values.size()) {
    name_index_.clear();
    indexed_count_ = 0;
  }
  for (; indexed_count_ < values.size(); ++indexed_count_) {
    name_index_[values[indexed_count_].name] = static_cast<ValueId>(indexed_count_);
  }
}

ValueId Graph::add_value(std::string name, TensorType type) {
  values.push_back(Value{std::move(name), std::move(type), nullptr});
  return static_cast<ValueId>(values.size() - 1);
}

ValueId Graph::add_constant(std::string name, Tensor tensor) {
  TensorType type = TensorType::make(tensor.dtype(), tensor.shape());
  ValueId id = add_value(std::move(name), type);
  values.back().constant = std::make_shared<const Tensor>(std::move(tensor));
  return id;
}

std::string Graph::unique_value_name(const std::string& base) const {
  refresh_index();
  if (!name_index_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string candidate = base + "_" + std::to_string(i);
    if (!name_index_.count(candidate)) return candidate;
  }
}

ValueId Graph::find_value(const std::string& name) const {
  refresh_index();
  auto it = name_index_.find(name);
  return it == name_index_.end() ? kNoValue : it->second;
}

ConstantOperands::ConstantOperands(const Graph& graph) : graph_(graph) {
  for (const Node& node : graph.nodes) {
    if (node.op_type != "Constant" || !node.domain.empty() || node.outputs.size() != 1) continue;
    const Attribute* value = node.attrs.find("value");
    if (value && value->kind == Attribute::Kind::kTensor && value->tensor) constant_nodes_[node.outputs[0]] = value->tensor.get();
  }
}

const Tensor* ConstantOperands::find(ValueId id) const {
  if (id == kNoValue) return nullptr;
  if (graph_.is_constant(id)) return graph_.value(id).constant.get();
  auto it = constant_nodes_.find(id);
  return it == constant_nodes_.end() ? nullptr : it->second;
}

}  // namespace tessera
