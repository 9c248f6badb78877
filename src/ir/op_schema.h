// One definition per op: name, opset range, arity, attributes with defaults,
// accepted dtypes, normalisation of legacy forms, and shape inference.
// Kernels live in the backends; everything else about an op lives here.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"

namespace tessera {

/// What shape inference sees of one node. Input values are known for
/// constants at compile time and for every input at run time.
class InferContext {
 public:
  InferContext(const Node& node, std::vector<const TensorType*> input_types,
               std::vector<const TensorView*> input_values, std::vector<TensorType>* outputs,
               std::vector<std::string> input_names = {})
      : node_(node), input_types_(std::move(input_types)), input_values_(std::move(input_values)),
        outputs_(outputs), input_names_(std::move(input_names)) {}

  const Node& node() const { return node_; }
  const AttributeMap& attrs() const { return node_.attrs; }
  int opset() const { return node_.opset; }
  size_t num_inputs() const { return input_types_.size(); }
  bool has_input(size_t i) const { return i < input_types_.size() && input_types_[i] != nullptr; }
  /// Throws a user error naming the node when input i is absent.
  const TensorType& input_type(size_t i) const;
  /// "input 1 'bias'" (or "input 1" when names are not known), for messages.
  std::string input_label(size_t i) const;
  DType input_dtype(size_t i) const { return input_type(i).dtype; }
  /// The value of input i when known, else nullptr.
  const TensorView* input_value(size_t i) const {
    return i < input_values_.size() ? input_values_[i] : nullptr;
  }
  /// The value of input i as integers, when known.
  std::optional<std::vector<int64_t>> input_ints(size_t i) const;
  size_t num_outputs() const { return outputs_->size(); }
  TensorType& output(size_t i) { return (*outputs_)[i]; }
  void set_output(size_t i, DType dtype, Shape dims) { (*outputs_)[i] = TensorType::make(dtype, std::move(dims)); }
  /// Output of unknown shape (rank known or not).
  void set_output_unknown(size_t i, DType dtype, int64_t rank = -1);

  /// Throws "node 'x' (Op): <message>".
  template <typename... Args>
  [[noreturn]] void fail(Args&&... args) const;

 private:
  const Node& node_;
  std::vector<const TensorType*> input_types_;
  std::vector<const TensorView*> input_values_;
  std::vector<TensorType>* outputs_;
  std::vector<std::string> input_names_;
};

using InferFn = std::function<void(InferContext&)>;
/// Rewrites a legacy form of the op into the form the kernels implement
/// (e.g. Squeeze's axes attribute before opset 13 into an input).
using NormalizeFn = std::function<void(Graph&, Node&)>;

struct AttributeSpec {
  std::string name;
  Attribute::Kind kind;
  std::optional<Attribute> default_value;  // absent: optional with no default, or required
  bool required = false;
};

struct OpSchema {
  std::string op_type;
  std::string domain;  // "" is the ONNX default domain
  int min_opset = 1;   // oldest opset whose semantics this schema implements
  int max_opset = 17;
  int min_inputs = 1;
  int max_inputs = 1;
  int min_outputs = 1;
  int max_outputs = 1;
  std::vector<AttributeSpec> attributes;
  std::vector<DType> input_dtypes;  // accepted dtypes of input 0; empty = any
  NormalizeFn normalize;
  InferFn infer;
  bool data_dependent_output = false;  // output shape depends on input values beyond what infer can see
  bool deterministic = true;           // false for random ops: never constant-folded
  /// The outputs depend on the inputs' shapes only, never their data (Shape,
  /// Size): folded whenever the input shapes are static, data or not.
  bool reads_shapes_only = false;
  /// Inputs and outputs may be sequences or optionals (ValueKind); the op's
  /// infer checks the kinds it gets. Every other op takes and makes tensors
  /// only, which run_shape_inference checks.
  bool boxed_values = false;
  /// Inputs and outputs may be string tensors (DType::kString); every other
  /// op refuses them (run_shape_inference checks), since kernels move
  /// elements bytewise.
  bool strings = false;
  /// Under --precision bf16, its products may read bfloat16 operands and
  /// accumulate in float32 (Conv, MatMul, Gemm): the one list of such ops,
  /// read by passes/precision.cc and by backends that lower them.
  bool bf16_compute = false;
};

class OpRegistry {
 public:
  static const OpRegistry& instance();
  void add(OpSchema schema);
  const OpSchema* find(const std::string& domain, const std::string& op_type) const;
  std::vector<const OpSchema*> all() const;

 private:
  std::vector<OpSchema> schemas_;
};

/// Whether op `op_type` of the default domain computes products that may read bf16 (its schema's
/// bf16_compute); a set made once from the registry, so callers may ask per node and value.
bool is_bf16_compute_op_type(const std::string& op_type);

/// For normalize hooks: turns attribute `attr` of a legacy op form into a
/// constant 1-D input at `position` (int/ints as int64, float/floats as
/// float32) and erases the attribute. Returns false when the attribute is absent.
bool move_attribute_to_input(Graph& graph, Node& node, const std::string& attr, size_t position);

/// The dtype an attribute such as Cast's `to` names by its ONNX code; throws
/// naming the node and attribute when Tessera has no such dtype.
DType dtype_from_onnx_attribute(const Node& node, const std::string& attribute, int64_t code);

/// Dtype lists for schemas.
extern const std::vector<DType> kFloatTypes;
extern const std::vector<DType> kNumericTypes;  // floats and integers
extern const std::vector<DType> kSignedNumericTypes;

// Registration, one function per op family (src/ir/ops/<family>.cc).
void register_elementwise_ops(OpRegistry& registry);
void register_nn_ops(OpRegistry& registry);
void register_tensor_ops(OpRegistry& registry);
void register_reduction_ops(OpRegistry& registry);
void register_misc_ops(OpRegistry& registry);
void register_recurrent_ops(OpRegistry& registry);
void register_quantization_ops(OpRegistry& registry);
void register_signal_ops(OpRegistry& registry);
void register_controlflow_ops(OpRegistry& registry);
void register_text_ops(OpRegistry& registry);
void register_sequence_ops(OpRegistry& registry);

template <typename... Args>
[[noreturn]] void InferContext::fail(Args&&... args) const {
  throw_user_error(node_.describe(), ": ", std::forward<Args>(args)...);
}

/// Runs `schema`'s shape inference on `ctx`, then checks the size of every
/// output whose shape it fixed (check_tensor_size, naming the node and output).
/// Every inference goes through here, at compile time and at run time, so a
/// shape computed from hostile values fails before anything is allocated.
void run_shape_inference(const OpSchema& schema, InferContext& ctx);

/// Runs `schema`'s shape inference for `node` of `graph`: input types from the
/// graph, constant inputs' values visible. Returns one type per output.
std::vector<TensorType> infer_node_outputs(const Graph& graph, const Node& node, const OpSchema& schema);

}  // namespace tessera
