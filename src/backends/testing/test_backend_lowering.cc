// Lowering a region graph to the test backend's program (one instruction per
// node; composites become fused instructions), and checking a parsed program
// against the region graph before it runs.
//
// A composite's body is walked from its output back to its inputs, so the
// fused instruction's operands come out in a fixed order (a, weight, bias)
// whatever order the partitioner listed the composite's inputs in.
#include <algorithm>

#include "backends/testing/test_backend_internal.h"
#include "ir/error.h"

namespace tessera::test_backend {
namespace {

struct PatternOpcode {
  const char* pattern;
  Opcode opcode;
};
constexpr PatternOpcode kPatternOpcodes[] = {
    {"Gelu", Opcode::kGelu},
    {"AddRelu", Opcode::kAddRelu},
    {"MatMulBias", Opcode::kMatMulBias},
    {"MatMulBiasRelu", Opcode::kMatMulBiasRelu},
    {"MatMulBiasGelu", Opcode::kMatMulBiasGelu},
};

struct OpOpcode {
  const char* op_type;
  Opcode opcode;
};
constexpr OpOpcode kOpOpcodes[] = {
    {"Relu", Opcode::kRelu},     {"Sigmoid", Opcode::kSigmoid},     {"Tanh", Opcode::kTanh},
    {"Neg", Opcode::kNeg},       {"Abs", Opcode::kAbs},             {"Exp", Opcode::kExp},
    {"Add", Opcode::kAdd},       {"Sub", Opcode::kSub},             {"Mul", Opcode::kMul},
    {"Div", Opcode::kDiv},       {"MatMul", Opcode::kMatMul},       {"Gemm", Opcode::kGemm},
    {"Softmax", Opcode::kSoftmax}, {"Transpose", Opcode::kTranspose}, {"Reshape", Opcode::kCopy},
    {"Flatten", Opcode::kCopy},
};

bool is_composite(const Node& node) { return node.op_type == "Composite" && node.domain == "tessera"; }

/// The opcode a region-graph node lowers to, or false when the backend has none.
bool opcode_for_node(const Node& node, Opcode& opcode) {
  if (is_composite(node)) {
    const std::string pattern = node.attrs.get_string_or("pattern", "");
    for (const PatternOpcode& entry : kPatternOpcodes) {
      if (pattern != entry.pattern) continue;
      opcode = entry.opcode;
      return true;
    }
    return false;
  }
  if (!node.domain.empty()) return false;
  for (const OpOpcode& entry : kOpOpcodes) {
    if (node.op_type != entry.op_type) continue;
    opcode = entry.opcode;
    return true;
  }
  return false;
}

/// Reads a composite's body graph: which body values stand for which of the
/// composite's inputs, what produces each value, and what is constant.
class BodyReader {
 public:
  BodyReader(const Graph& region, const Node& composite, const Graph& body)
      : region_(region), composite_(composite), body_(body), producer_(body.values.size(), -1) {
    for (size_t i = 0; i < body.nodes.size(); ++i) {
      for (ValueId id : body.nodes[i].outputs) {
        if (id < 0 || static_cast<size_t>(id) >= producer_.size()) continue;
        producer_[static_cast<size_t>(id)] = static_cast<int32_t>(i);
      }
    }
  }

  /// The node producing `value` if it is an `op_type` of the usual arity, else null.
  const Node* producer(ValueId value, const std::string& op_type) const {
    if (value == kNoValue || static_cast<size_t>(value) >= producer_.size()) return nullptr;
    const int32_t index = producer_[static_cast<size_t>(value)];
    if (index < 0) return nullptr;
    const Node& node = body_.nodes[static_cast<size_t>(index)];
    const size_t arity = op_type == "Erf" || op_type == "Relu" ? 1 : 2;
    if (node.op_type != op_type || !node.domain.empty() || node.inputs.size() != arity) return nullptr;
    return &node;
  }

  /// The region-graph value a body value stands for (a body input), else kNoValue.
  ValueId outer(ValueId value) const {
    for (size_t k = 0; k < body_.inputs.size() && k < composite_.inputs.size(); ++k) {
      if (body_.inputs[k] == value) return composite_.inputs[k];
    }
    return kNoValue;
  }

  /// The one float of a single-element constant (in the body or the region), or false.
  bool scalar(ValueId value, float& out) const {
    if (value < 0 || static_cast<size_t>(value) >= body_.values.size()) return false;
    const Tensor* tensor = body_.value(value).constant.get();
    const ValueId outer_id = outer(value);
    if (!tensor && outer_id != kNoValue) tensor = region_.value(outer_id).constant.get();
    if (!tensor || tensor->numel() != 1 || !dtype_is_float(tensor->dtype())) return false;
    out = static_cast<float>(tensor->double_at(0));
    return true;
  }

 private:
  const Graph& region_;
  const Node& composite_;
  const Graph& body_;
  std::vector<int32_t> producer_;
};

/// The two inputs of a binary node, tried in both orders: calls f(first, second)
/// until it returns true.
template <typename F>
bool either_order(const Node& node, F f) {
  return f(node.inputs[0], node.inputs[1]) || f(node.inputs[1], node.inputs[0]);
}

/// Add(MatMul(a, weight), bias) ending at `value`; operands as body values.
bool read_matmul_bias(const BodyReader& body, ValueId value, ValueId operands[3]) {
  const Node* add = body.producer(value, "Add");
  if (!add) return false;
  return either_order(*add, [&](ValueId product, ValueId bias) {
    const Node* matmul = body.producer(product, "MatMul");
    if (!matmul) return false;
    operands[0] = matmul->inputs[0];
    operands[1] = matmul->inputs[1];
    operands[2] = bias;
    return true;
  });
}

/// Mul(Mul(x, Add(Erf(Div(x, divisor)), addend)), scale) ending at `value`.
bool read_gelu(const BodyReader& body, ValueId value, ValueId& x, std::vector<float>& constants) {
  float divisor = 0, addend = 0, scale = 0;
  const Node* outer_mul = body.producer(value, "Mul");
  if (!outer_mul) return false;
  return either_order(*outer_mul, [&](ValueId product, ValueId scale_value) {
    const Node* inner_mul = body.producer(product, "Mul");
    if (!inner_mul || !body.scalar(scale_value, scale)) return false;
    return either_order(*inner_mul, [&](ValueId candidate_x, ValueId sum) {
      const Node* add = body.producer(sum, "Add");
      if (!add) return false;
      return either_order(*add, [&](ValueId erf_value, ValueId addend_value) {
        const Node* erf = body.producer(erf_value, "Erf");
        if (!erf || !body.scalar(addend_value, addend)) return false;
        const Node* divide = body.producer(erf->inputs[0], "Div");
        if (!divide || divide->inputs[0] != candidate_x || !body.scalar(divide->inputs[1], divisor)) return false;
        x = candidate_x;
        constants = {divisor, addend, scale};
        return true;
      });
    });
  });
}

[[noreturn]] void bad_body(const Node& composite, const std::string& pattern, const std::string& what) {
  throw_internal_error("test backend: ", composite.describe(), ": body of pattern ", pattern,
                       " does not have the shape the pattern implies (", what, ")");
}

/// The region value for a body value that must be one of the composite's inputs.
ValueId outer_operand(const BodyReader& body, ValueId value, const Node& composite, const std::string& pattern) {
  const ValueId id = body.outer(value);
  if (id == kNoValue) bad_body(composite, pattern, "an operand is not one of the composite's inputs");
  return id;
}

Instruction lower_composite(const Graph& region, const Node& node, Opcode opcode) {
  const std::string pattern = node.attrs.get_string_or("pattern", "");
  const Attribute* body_attribute = node.attrs.find("body");
  if (!body_attribute || body_attribute->kind != Attribute::Kind::kGraph || !body_attribute->graph) {
    bad_body(node, pattern, "no body graph");
  }
  const Graph& body = *body_attribute->graph;
  if (body.outputs.size() != 1 || node.outputs.size() != 1 || body.inputs.size() != node.inputs.size()) {
    bad_body(node, pattern, "expected one output and one body input per composite input");
  }
  BodyReader reader(region, node, body);
  Instruction instruction;
  instruction.opcode = opcode;
  instruction.outputs = {node.outputs[0]};
  const ValueId root = body.outputs[0];
  size_t expected_nodes = 0;
  bool matched = false;
  ValueId operands[3] = {kNoValue, kNoValue, kNoValue};
  switch (opcode) {
    case Opcode::kGelu: {
      ValueId x = kNoValue;
      matched = read_gelu(reader, root, x, instruction.floats);
      if (matched) instruction.inputs = {outer_operand(reader, x, node, pattern)};
      expected_nodes = 5;
      break;
    }
    case Opcode::kAddRelu: {
      const Node* relu = reader.producer(root, "Relu");
      const Node* add = relu ? reader.producer(relu->inputs[0], "Add") : nullptr;
      matched = add != nullptr;
      if (matched) {
        instruction.inputs = {outer_operand(reader, add->inputs[0], node, pattern),
                              outer_operand(reader, add->inputs[1], node, pattern)};
      }
      expected_nodes = 2;
      break;
    }
    case Opcode::kMatMulBias:
      matched = read_matmul_bias(reader, root, operands);
      expected_nodes = 2;
      break;
    case Opcode::kMatMulBiasRelu: {
      const Node* relu = reader.producer(root, "Relu");
      matched = relu && read_matmul_bias(reader, relu->inputs[0], operands);
      expected_nodes = 3;
      break;
    }
    case Opcode::kMatMulBiasGelu: {
      ValueId x = kNoValue;
      matched = read_gelu(reader, root, x, instruction.floats) && read_matmul_bias(reader, x, operands);
      expected_nodes = 7;
      break;
    }
    default: throw_internal_error("test backend: ", opcode_name(opcode), " is not a fused instruction");
  }
  if (!matched) bad_body(node, pattern, "its nodes do not connect as the pattern's do");
  if (operands[0] != kNoValue) {
    for (ValueId operand : operands) instruction.inputs.push_back(outer_operand(reader, operand, node, pattern));
  }
  // The walk found the pattern's nodes, all distinct; a body of exactly that
  // many nodes therefore holds nothing else.
  if (body.nodes.size() != expected_nodes) {
    bad_body(node, pattern, str_cat(body.nodes.size(), " nodes, expected ", expected_nodes));
  }
  return instruction;
}

Instruction lower_node(const Graph& region, const Node& node) {
  Opcode opcode;
  if (!opcode_for_node(node, opcode)) {
    throw_internal_error("test backend: ", node.describe(), " was placed on the test backend, which has no ",
                         "instruction for it");
  }
  if (is_composite(node)) return lower_composite(region, node, opcode);
  Instruction instruction;
  instruction.opcode = opcode;
  instruction.outputs = {node.outputs.at(0)};
  switch (opcode) {
    case Opcode::kAdd:
    case Opcode::kSub:
    case Opcode::kMul:
    case Opcode::kDiv:
    case Opcode::kMatMul: instruction.inputs = {node.inputs.at(0), node.inputs.at(1)}; break;
    case Opcode::kGemm:
      instruction.inputs = {node.inputs.at(0), node.inputs.at(1)};
      if (node.has_input(2)) instruction.inputs.push_back(node.inputs[2]);
      instruction.ints = {node.attrs.get_int_or("transA", 0), node.attrs.get_int_or("transB", 0)};
      instruction.floats = {node.attrs.get_float_or("alpha", 1.0f), node.attrs.get_float_or("beta", 1.0f)};
      break;
    case Opcode::kSoftmax: {
      instruction.inputs = {node.inputs.at(0)};
      const int64_t rank = region.value(node.inputs[0]).type.rank();
      int64_t axis = node.attrs.get_int_or("axis", -1);
      instruction.ints = {axis < 0 ? axis + rank : axis};
      break;
    }
    case Opcode::kTranspose: {
      instruction.inputs = {node.inputs.at(0)};
      const int64_t rank = region.value(node.inputs[0]).type.rank();
      std::vector<int64_t> reversed;
      for (int64_t d = rank - 1; d >= 0; --d) reversed.push_back(d);
      instruction.ints = node.attrs.get_ints_or("perm", reversed);
      break;
    }
    default: instruction.inputs = {node.inputs.at(0)}; break;  // unary ops and copies
  }
  return instruction;
}

// --- checks of a parsed program ---

template <typename... Args>
[[noreturn]] void bad_payload(size_t instruction, Args&&... args) {
  throw_user_error("test backend payload: instruction ", instruction, ": ", std::forward<Args>(args)...);
}

struct OperandRule {
  size_t min_inputs, max_inputs, ints, floats;
};

OperandRule operand_rule(Opcode opcode) {
  switch (opcode) {
    case Opcode::kAdd:
    case Opcode::kSub:
    case Opcode::kMul:
    case Opcode::kDiv:
    case Opcode::kMatMul:
    case Opcode::kAddRelu: return {2, 2, 0, 0};
    case Opcode::kGemm: return {2, 3, 2, 2};
    case Opcode::kSoftmax: return {1, 1, 1, 0};
    case Opcode::kTranspose: return {1, 1, SIZE_MAX, 0};  // ints: one per dim, checked with the shape
    case Opcode::kGelu: return {1, 1, 0, 3};
    case Opcode::kMatMulBias:
    case Opcode::kMatMulBiasRelu: return {3, 3, 0, 0};
    case Opcode::kMatMulBiasGelu: return {3, 3, 0, 3};
    default: return {1, 1, 0, 0};  // unary ops and copies
  }
}

/// Shapes of the operands agree with what the instruction computes.
void check_shapes(size_t index, const Instruction& instruction, const std::vector<const Shape*>& in,
                  const Shape& out) {
  Shape expected;
  switch (instruction.opcode) {
    case Opcode::kCopy:
      if (shape_numel(*in[0]) != shape_numel(out)) bad_payload(index, "copy changes the element count");
      return;
    case Opcode::kAdd:
    case Opcode::kSub:
    case Opcode::kMul:
    case Opcode::kDiv:
    case Opcode::kAddRelu:
      if (!broadcast_shape(*in[0], *in[1], expected)) bad_payload(index, "operands do not broadcast");
      break;
    case Opcode::kMatMul:
      if (!matmul_shape(*in[0], *in[1], expected)) bad_payload(index, "MatMul operands do not fit");
      break;
    case Opcode::kMatMulBias:
    case Opcode::kMatMulBiasRelu:
    case Opcode::kMatMulBiasGelu: {
      Shape product;
      if (!matmul_shape(*in[0], *in[1], product)) bad_payload(index, "MatMul operands do not fit");
      if (!broadcast_shape(product, *in[2], expected)) bad_payload(index, "bias does not broadcast");
      break;
    }
    case Opcode::kGemm: {
      const Shape& a = *in[0];
      const Shape& b = *in[1];
      if (a.size() != 2 || b.size() != 2) bad_payload(index, "Gemm operands must be 2-D");
      for (int64_t flag : instruction.ints) {
        if (flag != 0 && flag != 1) bad_payload(index, "Gemm transpose flag ", flag, " is not 0 or 1");
      }
      const bool trans_a = instruction.ints[0] != 0, trans_b = instruction.ints[1] != 0;
      const int64_t k = trans_a ? a[0] : a[1];
      if ((trans_b ? b[1] : b[0]) != k) bad_payload(index, "Gemm inner dimensions differ");
      expected = {trans_a ? a[1] : a[0], trans_b ? b[0] : b[1]};
      Shape with_c;
      if (in.size() == 3 && (in[2]->size() > 2 || !broadcast_shape(expected, *in[2], with_c) || with_c != expected)) {
        bad_payload(index, "Gemm C does not broadcast to the output");
      }
      break;
    }
    case Opcode::kSoftmax:
      if (instruction.ints[0] < 0 || instruction.ints[0] >= static_cast<int64_t>(in[0]->size())) {
        bad_payload(index, "Softmax axis ", instruction.ints[0], " out of range");
      }
      expected = *in[0];
      break;
    case Opcode::kTranspose: {
      const Shape& shape = *in[0];
      if (instruction.ints.size() != shape.size()) bad_payload(index, "perm has the wrong length");
      std::vector<char> seen(shape.size(), 0);
      for (int64_t axis : instruction.ints) {
        if (axis < 0 || axis >= static_cast<int64_t>(shape.size()) || seen[static_cast<size_t>(axis)]) {
          bad_payload(index, "perm is not a permutation");
        }
        seen[static_cast<size_t>(axis)] = 1;
        expected.push_back(shape[static_cast<size_t>(axis)]);
      }
      break;
    }
    default: expected = *in[0]; break;  // unary ops, Gelu
  }
  if (expected != out) {
    bad_payload(index, opcode_name(instruction.opcode), " output shape ", shape_to_string(out), ", expected ",
                shape_to_string(expected));
  }
}

}  // namespace

Program lower_region(const Graph& region) {
  Program program;
  program.value_count = static_cast<uint32_t>(region.values.size());
  for (size_t i = 0; i < region.nodes.size(); ++i) {
    Instruction instruction = lower_node(region, region.nodes[i]);
    instruction.node_index = static_cast<uint32_t>(i);
    program.instructions.push_back(std::move(instruction));
  }
  return program;
}

void check_program_against(const Program& program, const Graph& region) {
  if (program.value_count != region.values.size()) {
    throw_user_error("test backend payload: built for a region of ", program.value_count, " values; this one has ",
                     region.values.size());
  }
  if (program.instructions.size() != region.nodes.size()) {
    throw_user_error("test backend payload: ", program.instructions.size(), " instructions for a region of ",
                     region.nodes.size(), " nodes");
  }
  for (size_t i = 0; i < program.instructions.size(); ++i) {
    const Instruction& instruction = program.instructions[i];
    if (instruction.node_index != i) bad_payload(i, "runs node ", instruction.node_index, ", expected node ", i);
    const Node& node = region.nodes[i];
    Opcode expected;
    if (!opcode_for_node(node, expected) || expected != instruction.opcode) {
      bad_payload(i, opcode_name(instruction.opcode), " does not run ", node.describe());
    }
    const OperandRule rule = operand_rule(instruction.opcode);
    if (instruction.inputs.size() < rule.min_inputs || instruction.inputs.size() > rule.max_inputs ||
        instruction.outputs.size() != 1 || (rule.ints != SIZE_MAX && instruction.ints.size() != rule.ints) ||
        instruction.floats.size() != rule.floats) {
      bad_payload(i, "wrong number of operands or attributes for ", opcode_name(instruction.opcode));
    }
    std::vector<const Shape*> input_shapes;
    auto check_value = [&](ValueId id, const char* what) -> const Shape& {
      if (id < 0 || static_cast<size_t>(id) >= region.values.size()) bad_payload(i, what, " id ", id, " out of range");
      const TensorType& type = region.value(id).type;
      if (type.dtype != DType::kFloat32 || !type.is_static()) {
        bad_payload(i, what, " '", region.value(id).name, "' is ", type.to_string(), "; only static float32");
      }
      const Tensor* constant = region.value(id).constant.get();
      if (constant && (constant->dtype() != DType::kFloat32 || constant->shape() != type.dims)) {
        bad_payload(i, "constant '", region.value(id).name, "' does not match its type");
      }
      return type.dims;
    };
    for (ValueId id : instruction.inputs) {
      input_shapes.push_back(&check_value(id, "input"));
      if (std::find(node.inputs.begin(), node.inputs.end(), id) == node.inputs.end()) {
        bad_payload(i, "input '", region.value(id).name, "' is not an input of ", node.describe());
      }
    }
    const Shape& output_shape = check_value(instruction.outputs[0], "output");
    if (node.outputs.size() != 1 || node.outputs[0] != instruction.outputs[0]) {
      bad_payload(i, "output is not the output of ", node.describe());
    }
    if (region.is_constant(instruction.outputs[0])) bad_payload(i, "writes a constant");
    check_shapes(i, instruction, input_shapes, output_shape);
  }
}

}  // namespace tessera::test_backend
