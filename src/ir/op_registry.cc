#include "ir/error.h"
#include "ir/op_schema.h"

namespace tessera {

const std::vector<DType> kFloatTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16};
const std::vector<DType> kSignedNumericTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16,
                                                DType::kInt8,    DType::kInt16,   DType::kInt32,
                                                DType::kInt64};
const std::vector<DType> kNumericTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt8,
                                          DType::kInt16,   DType::kInt32,   DType::kInt64,   DType::kUInt8,
                                          DType::kUInt16,  DType::kUInt32,  DType::kUInt64};

const TensorType& InferContext::input_type(size_t i) const {
  if (!has_input(i)) fail("input ", i, " is required but missing");
  return *input_types_[i];
}

std::string InferContext::input_label(size_t i) const {
  std::string label = "input " + std::to_string(i);
  if (i < input_names_.size() && !input_names_[i].empty()) label += " '" + input_names_[i] + "'";
  return label;
}

std::optional<std::vector<int64_t>> InferContext::input_ints(size_t i) const {
  const TensorView* v = input_value(i);
  if (!v) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(v->numel()));
  for (int64_t k = 0; k < v->numel(); ++k) out[static_cast<size_t>(k)] = view_int_at(*v, k);
  return out;
}

void InferContext::set_output_unknown(size_t i, DType dtype, int64_t rank) {
  TensorType t;
  t.dtype = dtype;
  t.rank_known = rank >= 0;
  if (rank >= 0) t.dims.assign(static_cast<size_t>(rank), -1);
  (*outputs_)[i] = t;
}

const OpRegistry& OpRegistry::instance() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    register_elementwise_ops(*r);
    register_nn_ops(*r);
    register_tensor_ops(*r);
    register_reduction_ops(*r);
    register_misc_ops(*r);
    register_recurrent_ops(*r);
    register_quantization_ops(*r);
    register_signal_ops(*r);
    return r;
  }();
  return *registry;
}

void OpRegistry::add(OpSchema schema) {
  if (find(schema.domain, schema.op_type)) {
    throw_internal_error("op ", schema.op_type, " registered twice");
  }
  schemas_.push_back(std::move(schema));
}

const OpSchema* OpRegistry::find(const std::string& domain, const std::string& op_type) const {
  const std::string& d = domain == "ai.onnx" ? std::string() : domain;
  for (const OpSchema& s : schemas_) {
    if (s.op_type == op_type && s.domain == d) return &s;
  }
  return nullptr;
}

std::vector<const OpSchema*> OpRegistry::all() const {
  std::vector<const OpSchema*> out;
  for (const OpSchema& s : schemas_) out.push_back(&s);
  return out;
}

}  // namespace tessera
