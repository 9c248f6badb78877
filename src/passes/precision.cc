// Which nodes may compute in bfloat16 (see precision.h).
#include "passes/precision.h"

#include "ir/op_schema.h"

#include "ir/error.h"

namespace tessera {

PrecisionPolicy parse_precision(const std::string& text) {
  PrecisionPolicy policy;
  if (text == "fp32" || text == "float32") return policy;
  if (text == "bf16" || text == "bfloat16") {
    policy.bf16 = true;
    return policy;
  }
  if (text == "bf16-all") {
    policy.bf16 = true;
    policy.final_layer = true;
    return policy;
  }
  throw_user_error("unknown precision '", text, "' (known: fp32; bf16: convolutions and matmuls in bfloat16 with ",
                   "float32 accumulation, the final layer in float32; bf16-all: the final layer too)");
}

std::string precision_text(const PrecisionPolicy& policy) {
  if (!policy.bf16) return "fp32";
  return policy.final_layer ? "bf16-all" : "bf16";
}

bool is_bf16_compute_op(const Node& node) {
  return node.domain.empty() && is_bf16_compute_op_type(node.op_type);  // the op schema says (Conv, MatMul, Gemm)
}

std::vector<char> bf16_nodes(const Graph& graph, const PrecisionPolicy& policy, std::vector<char>* final_layer) {
  const size_t n = graph.nodes.size();
  std::vector<char> marked(n, 0);
  if (final_layer) final_layer->assign(n, 0);
  if (!policy.bf16) return marked;
  // The final layer: compute nodes with no compute node after them (none reads
  // their output, directly or through other ops). In reverse topological
  // order, a value "feeds compute" when a compute node, or a node whose
  // output feeds compute, reads it.
  std::vector<char> feeds_compute(graph.values.size(), 0);
  std::vector<char> last(n, 0);
  for (size_t i = n; i-- > 0;) {
    const Node& node = graph.nodes[i];
    bool downstream = false;
    for (ValueId out : node.outputs) downstream |= out != kNoValue && feeds_compute[static_cast<size_t>(out)];
    const bool compute = is_bf16_compute_op(node);
    if (compute && !downstream) last[i] = 1;
    if (compute || downstream) {
      for (ValueId in : node.inputs) {
        if (in != kNoValue) feeds_compute[static_cast<size_t>(in)] = 1;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const Node& node = graph.nodes[i];
    if (!is_bf16_compute_op(node)) continue;
    // Only float32 arithmetic is reduced.
    bool float_operands = true;
    for (ValueId in : node.inputs) {
      if (in != kNoValue && graph.value(in).type.dtype != DType::kFloat32) float_operands = false;
    }
    if (!float_operands) continue;
    if (last[i] && !policy.final_layer) {
      if (final_layer) (*final_layer)[i] = 1;
      continue;
    }
    marked[i] = 1;
  }
  return marked;
}

}  // namespace tessera
