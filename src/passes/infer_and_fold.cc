#include "passes/infer_and_fold.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/int8_weights.h"
#include "ir/op_schema.h"
#include "ir/shape_util.h"
#include "passes/shape_values.h"

namespace tessera {
namespace {

constexpr int64_t kMaxFoldedBytes = 64 << 20;

bool all_inputs_constant(const Graph& graph, const Node& node) {
  for (ValueId id : node.inputs) {
    if (id != kNoValue && !graph.is_constant(id)) return false;
  }
  return true;
}

std::string dtype_list(const std::vector<DType>& types) {
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) out += (i ? ", " : "") + std::string(dtype_name(types[i]));
  return out;
}

}  // namespace

void infer_and_fold(Graph& graph, const NodeEvaluator& evaluate) {
  // Weight-only int8 weights (ir/int8_weights.h) that only products read as their weights stay 8-bit:
  // folded, they would be float32 four times the size (and above kMaxFoldedBytes a dequantization
  // every run).
  std::vector<std::vector<const Node*>> readers(graph.values.size());
  std::vector<char> is_output(graph.values.size(), 0);
  for (const Node& node : graph.nodes) {
    for (ValueId id : node.inputs) {
      if (id != kNoValue) readers[static_cast<size_t>(id)].push_back(&node);
    }
  }
  for (ValueId id : graph.outputs) is_output[static_cast<size_t>(id)] = 1;
  auto int8_weights_kept = [&](const Node& node) {
    if (!dequantizes_int8_weights(graph, node)) return false;
    const size_t out = static_cast<size_t>(node.outputs[0]);
    if (is_output[out] || readers[out].empty()) return false;
    for (const Node* reader : readers[out]) {
      if (!reads_as_int8_weights(graph, *reader, node)) return false;
    }
    return true;
  };
  ShapeValues shape_values(evaluate);
  for (Node& node : graph.nodes) {
    shape_values.give_reshape_a_constant_target(graph, node);
    const OpSchema* schema = OpRegistry::instance().find(node.domain, node.op_type);
    if (!schema) throw_unsupported(node.describe(), ": unknown op");
    if (!schema->input_dtypes.empty() && node.has_input(0)) {
      const Value& in = graph.value(node.inputs[0]);
      if (std::find(schema->input_dtypes.begin(), schema->input_dtypes.end(), in.type.dtype) ==
          schema->input_dtypes.end()) {
        throw_unsupported(node.describe(), ": input '", in.name, "' has dtype ", dtype_name(in.type.dtype), "; ",
                          node.op_type, " supports ", dtype_list(schema->input_dtypes));
      }
    }
    // Checks every inferred shape's size (run_shape_inference).
    std::vector<TensorType> outputs = infer_node_outputs(graph, node, *schema);

    // Fold when every input is constant, or when only input shapes matter and they are static.
    bool shapes_suffice = schema->reads_shapes_only;
    for (ValueId id : node.inputs) shapes_suffice &= id == kNoValue || graph.value(id).type.is_static();
    bool fold = schema->deterministic && (all_inputs_constant(graph, node) || shapes_suffice) && !int8_weights_kept(node);
    // Constants are tensors: a node that makes or reads a sequence or optional runs.
    // String tensors are not folded either: artifacts hold no string constants.
    for (const TensorType& t : outputs) fold &= t.is_tensor() && t.dtype != DType::kString;
    for (ValueId id : node.inputs) {
      fold &= id == kNoValue || (graph.value(id).type.is_tensor() && graph.value(id).type.dtype != DType::kString);
    }
    if (fold) {
      for (const TensorType& t : outputs) {
        if (t.is_static() && shape_numel(t.dims) * static_cast<int64_t>(dtype_size(t.dtype)) > kMaxFoldedBytes) fold = false;
      }
    }
    if (fold) {
      std::vector<Tensor> shape_holders(node.inputs.size());
      std::vector<const Tensor*> inputs(node.inputs.size(), nullptr);
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i] == kNoValue) continue;
        const Value& v = graph.value(node.inputs[i]);
        if (v.constant) {
          inputs[i] = v.constant.get();
        } else {
          shape_holders[i] = Tensor::without_data(v.type.dtype, v.type.dims);
          inputs[i] = &shape_holders[i];
        }
      }
      std::vector<Tensor> results = evaluate(node, inputs);
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i] == kNoValue) continue;
        Value& out = graph.value(node.outputs[i]);
        out.type = TensorType::make(results[i].dtype(), results[i].shape());
        out.constant = std::make_shared<const Tensor>(std::move(results[i]));
      }
      continue;
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] != kNoValue) graph.value(node.outputs[i]).type = outputs[i];
    }
    // A shape computation known in full though the tensor it measures has open dims.
    if (schema->deterministic) {
      if (std::optional<Tensor> known = shape_values.observe(graph, node)) {
        Value& out = graph.value(node.outputs[0]);
        out.type = TensorType::make(known->dtype(), known->shape());
        out.constant = std::make_shared<const Tensor>(std::move(*known));
      }
    }
  }
}

void eliminate_dead_nodes(Graph& graph) {
  std::vector<char> used(graph.values.size(), 0);
  for (ValueId id : graph.outputs) used[static_cast<size_t>(id)] = 1;
  std::vector<char> keep(graph.nodes.size(), 0);
  for (size_t n = graph.nodes.size(); n-- > 0;) {
    const Node& node = graph.nodes[n];
    bool live = false;
    for (ValueId id : node.outputs) {
      // A folded output is a constant: the node that computed it is no longer needed.
      if (id != kNoValue && used[static_cast<size_t>(id)] && !graph.is_constant(id)) live = true;
    }
    if (!live) continue;
    keep[n] = 1;
    for (ValueId id : node.inputs) {
      if (id != kNoValue) used[static_cast<size_t>(id)] = 1;
    }
  }
  std::vector<Node> kept;
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    if (keep[n]) kept.push_back(std::move(graph.nodes[n]));
  }
  graph.nodes = std::move(kept);
  // Drop constants nothing reads, so the plan does not own dead weights.
  for (size_t i = 0; i < graph.values.size(); ++i) {
    if (graph.values[i].constant && !used[i]) graph.values[i].constant = nullptr;
  }
}

}  // namespace tessera
