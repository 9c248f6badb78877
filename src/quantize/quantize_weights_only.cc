// Weight-only int8 (`tessera quantize --weights-only`): every MatMul and Gemm
// whose second operand is a constant float32 matrix reads it as
// DequantizeLinear(int8 weights, a scale per output column) instead; nothing
// else changes and nothing is calibrated, so activations stay float32. The
// file is standard ONNX (ONNX Runtime folds the DequantizeLinear at load and
// runs float32); Tessera's native backend recognises the 8-bit weights and
// runs products of few rows (a decoder's token step, which reads every weight
// once) on them: a quarter of the bytes to read.
//
// Contract: same output rules as the static mode (quantize.h): the original
// file is edited by the QDQ writer, a weight read by other nodes too (a tied
// embedding's Gather) stays float32 for those, and the summary lists what was
// quantized and why the rest stayed float.
#include <map>
#include <set>
#include <sstream>

#include "ir/error.h"
#include "quantize/quantize.h"
#include "quantize/quantize_internal.h"

namespace tessera::quantize {

std::string Quantizer::write_weights_only(const std::string& output_path) {
  const std::set<std::string> exclude(options_.exclude.begin(), options_.exclude.end());
  onnx_frontend::QdqPlan plan;
  std::map<ValueId, size_t> entry_of;  // a weight read by several products is stored once
  std::map<std::string, int64_t> quantized_ops;
  FloatOps float_ops;
  int64_t float_bytes = 0, int8_bytes = 0;
  bool per_tensor = false;
  for (const Node& node : graph_.nodes) {
    const std::string& op = node.op_type;
    if (!node.domain.empty() || (op != "MatMul" && op != "Gemm")) continue;
    auto refuse = [&](const std::string& why) { float_ops[op][why].push_back(node.name); };
    if (exclude.count(node.name) || exclude.count(op)) {
      refuse("excluded (--exclude)");
      continue;
    }
    if (node.inputs.size() < 2 || node.outputs.empty() || node.outputs[0] == kNoValue) {
      refuse("no second operand or no output");
      continue;
    }
    const Value& a = graph_.value(node.inputs[0]);
    const Value& b = graph_.value(node.inputs[1]);
    if (!b.constant) {
      refuse("its second operand is not a constant");
      continue;
    }
    if (b.constant->dtype() != DType::kFloat32) {
      refuse("its weight is not float32");
      continue;
    }
    if (b.constant->shape().size() != 2) {
      refuse("its weight is not a matrix");
      continue;
    }
    if (a.constant) {
      refuse("its first operand is a constant too");
      continue;
    }
    // The output channels: B's columns, or its rows for Gemm with transB. A scale per channel needs
    // opset 13 (per-axis DequantizeLinear); below it, one scale per weight.
    int64_t axis = op == "Gemm" && node.attrs.get_int_or("transB", 0) ? 0 : 1;
    if (node.opset < 13) {
      axis = -1;
      per_tensor = true;
    }
    const auto [entry, added] = entry_of.emplace(node.inputs[1], plan.constants.size());
    if (added) {
      plan.constants.push_back(quantize_weight(b.name, *b.constant, axis));
      float_bytes += static_cast<int64_t>(b.constant->nbytes());
      int8_bytes += b.constant->numel();
    }
    plan.constants[entry->second].consumers.push_back(graph_.value(node.outputs[0]).name);
    ++quantized_ops[op];
  }
  if (plan.constants.empty()) {
    throw_user_error("quantize --weights-only: '", model_path_,
                     "' has no MatMul or Gemm whose second operand is a constant float32 matrix");
  }
  write_qdq_model(model_path_, output_path, plan);

  std::ostringstream out;
  out << "weight-only int8: weights symmetric " << (per_tensor ? "per tensor (the model's opset is below 13)" : "per output channel")
      << ", activations float32 (nothing calibrated)\n";
  out << "quantized:";
  const char* separator = " ";
  for (const auto& [op, n] : quantized_ops) {
    out << separator << op << " " << n;
    separator = ", ";
  }
  out << "\nweights: " << plan.constants.size() << " tensors, " << float_bytes / 1e6 << " MB float32 -> " << int8_bytes / 1e6
      << " MB int8\n";
  write_left_in_float(out, float_ops);
  return out.str();
}

}  // namespace tessera::quantize
