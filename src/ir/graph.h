// The graph IR: plain data. Values are identified by index (ValueId); a node
// lists the values it reads and writes. Behaviour lives in passes.
//
// Invariants (checked by verify_graph):
//  - every value has exactly one definition: a graph input, a constant, or one node output;
//  - nodes are stored in a topological order (every input defined before use);
//  - every graph output is defined; names of values are unique.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ir/dtype.h"
#include "ir/tensor.h"

namespace tessera {

using ValueId = int32_t;
constexpr ValueId kNoValue = -1;  // an omitted optional input

/// Type of a value. dims holds -1 for a dimension not known yet; symbols holds
/// the ONNX dim_param names (only meaningful on graph inputs) or "".
/// For a sequence or an optional, dtype and dims describe its tensors (every
/// element of a sequence has the dtype; dims are those all elements share).
struct TensorType {
  DType dtype = DType::kUndefined;
  bool rank_known = false;
  Shape dims;
  std::vector<std::string> symbols;
  ValueKind kind = ValueKind::kTensor;

  /// A tensor whose dtype and every dim are known (never a sequence or optional).
  bool is_static() const;
  bool is_tensor() const { return kind == ValueKind::kTensor; }
  bool is_sequence() const { return kind == ValueKind::kSequence || kind == ValueKind::kOptionalSequence; }
  bool is_optional() const { return kind == ValueKind::kOptionalTensor || kind == ValueKind::kOptionalSequence; }
  int64_t rank() const { return static_cast<int64_t>(dims.size()); }
  /// "float32[1x3x?x?]", "sequence<float32[?]>", "optional<sequence<int64[3]>>".
  std::string to_string() const;
  /// The type of a tensor of this type's dtype and dims (a sequence's elements, an optional's content).
  TensorType element() const;
  static TensorType make(DType dtype, Shape dims);
  static TensorType of_kind(ValueKind kind, const TensorType& element);
};

/// An attribute that holds a type (ONNX TYPE_PROTO, e.g. Optional's `type`)
/// is kept as ints: [kind, dtype, rank or -1, dims...].
std::vector<int64_t> encode_type_attribute(const TensorType& type);
/// Throws a user error naming `where` when the ints are not such an encoding.
TensorType decode_type_attribute(const std::vector<int64_t>& ints, const std::string& where);

struct Graph;

/// A node attribute. Tensors and subgraphs are held by shared pointer.
struct Attribute {
  enum class Kind { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kGraph };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  std::shared_ptr<Tensor> tensor;
  std::shared_ptr<Graph> graph;

  static Attribute of_int(int64_t v);
  static Attribute of_float(float v);
  static Attribute of_string(std::string v);
  static Attribute of_ints(std::vector<int64_t> v);
  static Attribute of_floats(std::vector<float> v);
  static Attribute of_tensor(Tensor v);
};

const char* attribute_kind_name(Attribute::Kind kind);

class AttributeMap {
 public:
  /// Names compare without a std::string (std::less<>): a kernel's lookup of a long name
  /// ("tessera_transpose_b") at every run allocated one.
  using Map = std::map<std::string, Attribute, std::less<>>;
  bool has(std::string_view name) const { return map_.find(name) != map_.end(); }
  const Attribute* find(std::string_view name) const;
  void set(const std::string& name, Attribute value) { map_[name] = std::move(value); }
  void erase(std::string_view name) {
    if (auto it = map_.find(name); it != map_.end()) map_.erase(it);
  }
  const Map& all() const { return map_; }

  // Typed getters. The *_or forms return the fallback when absent; the others
  // throw a user error naming the attribute when absent or of the wrong kind.
  int64_t get_int(std::string_view name) const;
  int64_t get_int_or(std::string_view name, int64_t fallback) const;
  float get_float(std::string_view name) const;
  float get_float_or(std::string_view name, float fallback) const;
  std::string get_string_or(std::string_view name, const std::string& fallback) const;
  std::vector<int64_t> get_ints_or(std::string_view name, std::vector<int64_t> fallback) const;
  std::vector<float> get_floats_or(std::string_view name, std::vector<float> fallback) const;
  std::vector<std::string> get_strings_or(std::string_view name, std::vector<std::string> fallback) const;

 private:
  const Attribute& get_checked(std::string_view name, Attribute::Kind kind) const;
  Map map_;
};

/// A node that a fusion pass folded into another one (kept for placement and profiles).
struct FusedNode {
  std::string name;
  std::string op_type;
};

struct Node {
  std::string name;     // unique within the graph (the importer names unnamed nodes)
  std::string op_type;  // e.g. "Conv"
  std::string domain;   // "" for the default ONNX domain
  int opset = 0;        // opset version of the node's domain in the model
  std::vector<ValueId> inputs;   // kNoValue for an omitted optional input
  std::vector<ValueId> outputs;  // kNoValue for an omitted optional output
  AttributeMap attrs;
  std::vector<FusedNode> fused;  // nodes folded into this one by fusion passes, in order

  bool has_input(size_t i) const { return i < inputs.size() && inputs[i] != kNoValue; }
  bool has_output(size_t i) const { return i < outputs.size() && outputs[i] != kNoValue; }
  /// "node 'conv_12' (Conv)" for error messages.
  std::string describe() const;
};

struct Value {
  std::string name;
  TensorType type;
  std::shared_ptr<const Tensor> constant;  // set for weights and folded values
};

struct Graph {
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::map<std::string, std::string> metadata;  // producer, doc string, model metadata_props

  ValueId add_value(std::string name, TensorType type = {});
  ValueId add_constant(std::string name, Tensor tensor);
  /// A name not used by any value yet, starting with `base`.
  std::string unique_value_name(const std::string& base) const;
  ValueId find_value(const std::string& name) const;  // kNoValue when absent
  bool is_constant(ValueId id) const { return id != kNoValue && values[static_cast<size_t>(id)].constant != nullptr; }
  Value& value(ValueId id) { return values[static_cast<size_t>(id)]; }
  const Value& value(ValueId id) const { return values[static_cast<size_t>(id)]; }

 private:
  mutable std::map<std::string, ValueId> name_index_;
  mutable size_t indexed_count_ = 0;
  void refresh_index() const;
};

/// The constant operands of a graph as imported, before constant folding:
/// initializers, and the outputs of Constant nodes with a `value` tensor
/// (which folding would turn into constants later). For the passes that run
/// before it (fold_qdq) and for the quantizer's plan.
class ConstantOperands {
 public:
  explicit ConstantOperands(const Graph& graph);
  /// The value of `id`, or null when it is not a constant operand (or kNoValue).
  const Tensor* find(ValueId id) const;

 private:
  const Graph& graph_;
  std::map<ValueId, const Tensor*> constant_nodes_;
};

}  // namespace tessera
