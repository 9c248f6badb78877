// What the test backend claims: a handful of float32 ops with static shapes,
// and fused patterns that exercise the pattern language (a DAG with a value
// used twice, commutative operands, scalar constants with a tolerance, and an
// op — Erf — that is claimed only inside a pattern, never alone).
#include <cmath>

#include "backends/testing/test_backend_internal.h"
#include "partition/common_patterns.h"
#include "partition/declarations.h"

namespace tessera::test_backend {
namespace {

constexpr const char* kPrefix = "test backend: ";

SupportDecision refuse(std::string reason) { return {false, kPrefix + std::move(reason)}; }

/// Every present input and output (but input 1 when asked: Reshape's int64
/// shape) is float32 with a static shape; the reason names the first that is not.
SupportDecision check_float32_static(const Graph& graph, const Node& node, bool skip_input_1 = false) {
  auto check = [&](const char* kind, ValueId id) -> SupportDecision {
    const Value& value = graph.value(id);
    if (value.type.dtype != DType::kFloat32) {
      return refuse(std::string(kind) + " '" + value.name + "' is " + dtype_name(value.type.dtype) +
                    "; only float32");
    }
    if (!value.type.is_static()) {
      return refuse(std::string(kind) + " '" + value.name + "' has a dynamic shape (" + value.type.to_string() +
                    "); only static shapes");
    }
    return {true, ""};
  };
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue || (skip_input_1 && i == 1)) continue;
    SupportDecision d = check("input", node.inputs[i]);
    if (!d.supported) return d;
  }
  for (ValueId id : node.outputs) {
    if (id == kNoValue) continue;
    SupportDecision d = check("output", id);
    if (!d.supported) return d;
  }
  return {true, ""};
}

SupportDecision float32_static(const Graph& graph, const Node& node) { return check_float32_static(graph, node); }

SupportDecision check_matmul(const Graph& graph, const Node& node) {
  if (!node.has_input(0) || !node.has_input(1)) return refuse("MatMul needs two inputs");
  SupportDecision d = check_float32_static(graph, node);
  if (!d.supported) return d;
  for (size_t i = 0; i < 2; ++i) {
    const Value& value = graph.value(node.inputs[i]);
    if (value.type.rank() < 2) {
      return refuse("MatMul input '" + value.name + "' has rank " + std::to_string(value.type.rank()) +
                    "; only rank >= 2 (1-D operands are not supported)");
    }
  }
  return {true, ""};
}

SupportDecision check_gemm(const Graph& graph, const Node& node) {
  if (!node.has_input(0) || !node.has_input(1)) return refuse("Gemm needs inputs A and B");
  SupportDecision d = check_float32_static(graph, node);
  if (!d.supported) return d;
  for (size_t i = 0; i < 2; ++i) {
    const Value& value = graph.value(node.inputs[i]);
    if (value.type.rank() != 2) {
      return refuse("Gemm input '" + value.name + "' has rank " + std::to_string(value.type.rank()) + "; only 2");
    }
  }
  if (node.has_input(2) && graph.value(node.inputs[2]).type.rank() > 2) {
    return refuse("Gemm input C has rank " + std::to_string(graph.value(node.inputs[2]).type.rank()) +
                  "; at most 2");
  }
  return {true, ""};
}

SupportDecision check_softmax(const Graph& graph, const Node& node) {
  if (node.opset < 13) {
    return refuse("Softmax at opset " + std::to_string(node.opset) +
                  " coerces its input to 2-D; only opset >= 13 semantics (one axis)");
  }
  return check_float32_static(graph, node);
}

SupportDecision check_reshape(const Graph& graph, const Node& node) {
  if (!node.has_input(1) || !graph.is_constant(node.inputs[1])) {
    return refuse("Reshape needs a constant shape input");
  }
  return check_float32_static(graph, node, /*skip_input_1=*/true);
}

/// A pattern predicate from a support check: the fused op must be one the
/// backend could also run alone (same dtype and shape rules).
std::function<bool(const Graph&, const Node&)> accepted_by(SupportDecision (*check)(const Graph&, const Node&)) {
  return [check](const Graph& graph, const Node& node) { return check(graph, node).supported; };
}

Pattern float_op(const std::string& op_type, std::vector<Pattern> inputs) {
  Pattern p = op(op_type, std::move(inputs));
  p.where(accepted_by(&float32_static));
  return p;
}

/// Add(MatMul(any, constant), constant).
Pattern matmul_bias() {
  Pattern matmul = op("MatMul", {any(), constant()});
  matmul.where(accepted_by(&check_matmul));
  return float_op("Add", {matmul, constant()});
}

/// The erf form of GELU that PyTorch exports (x is used twice), on float32 nodes.
Pattern gelu_of(Pattern x) { return gelu_erf_pattern(std::move(x), accepted_by(&float32_static)); }

}  // namespace

Declarations make_test_declarations() {
  Declarations declarations;
  declarations.op({"Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Exp", "Add", "Sub", "Mul", "Div", "Transpose",
                   "Flatten"},
                  &float32_static);
  declarations.op("MatMul", &check_matmul);
  declarations.op("Gemm", &check_gemm);
  declarations.op("Softmax", &check_softmax);
  declarations.op("Reshape", &check_reshape);

  // Largest first: the partitioner tries patterns in declaration order.
  declarations.pattern("MatMulBiasGelu", gelu_of(matmul_bias()));
  Pattern relu_of_bias = float_op("Relu", {matmul_bias()});
  declarations.pattern("MatMulBiasRelu", relu_of_bias);
  declarations.pattern("MatMulBias", matmul_bias());
  declarations.pattern("Gelu", gelu_of(any()));
  declarations.pattern("AddRelu", float_op("Relu", {float_op("Add", {any(), any()})}));
  return declarations;
}

}  // namespace tessera::test_backend
