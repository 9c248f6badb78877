#include <algorithm>

#include "ir/error.h"
#include "ir/op_schema.h"

#include <set>
#include "ir/shape_util.h"

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

bool move_attribute_to_input(Graph& graph, Node& node, const std::string& attr, size_t position) {
  const Attribute* a = node.attrs.find(attr);
  if (!a) return false;
  Tensor tensor;
  switch (a->kind) {
    case Attribute::Kind::kInt:
    case Attribute::Kind::kInts: {
      std::vector<int64_t> values = a->kind == Attribute::Kind::kInt ? std::vector<int64_t>{a->i} : a->ints;
      tensor = Tensor(DType::kInt64, {static_cast<int64_t>(values.size())});
      std::copy(values.begin(), values.end(), tensor.as<int64_t>());
      break;
    }
    case Attribute::Kind::kFloat:
    case Attribute::Kind::kFloats: {
      std::vector<float> values = a->kind == Attribute::Kind::kFloat ? std::vector<float>{a->f} : a->floats;
      tensor = Tensor(DType::kFloat32, {static_cast<int64_t>(values.size())});
      std::copy(values.begin(), values.end(), tensor.as<float>());
      break;
    }
    default:
      throw_user_error(node.describe(), ": attribute '", attr, "' is ", attribute_kind_name(a->kind),
                       ", expected numbers");
  }
  if (node.inputs.size() <= position) node.inputs.resize(position + 1, kNoValue);
  node.inputs[position] = graph.add_constant(graph.unique_value_name(node.name + "_" + attr), std::move(tensor));
  node.attrs.erase(attr);
  return true;
}

DType dtype_from_onnx_attribute(const Node& node, const std::string& attribute, int64_t code) {
  DType dtype = dtype_from_onnx_code(code);
  if (dtype != DType::kUndefined) return dtype;
  if (code == 14 || code == 15) {
    throw_unsupported(node.describe(), ": attribute '", attribute, "' is ", onnx_dtype_code_name(code),
                      ", which is not supported");
  }
  throw_user_error(node.describe(), ": attribute '", attribute, "' is ", onnx_dtype_code_name(code),
                   ", not an ONNX data type");
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
    register_controlflow_ops(*r);
    register_text_ops(*r);
    register_sequence_ops(*r);
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

std::vector<TensorType> infer_node_outputs(const Graph& graph, const Node& node, const OpSchema& schema) {
  std::vector<const TensorType*> input_types(node.inputs.size(), nullptr);
  std::vector<TensorView> value_views(node.inputs.size());
  std::vector<const TensorView*> input_values(node.inputs.size(), nullptr);
  std::vector<std::string> input_names(node.inputs.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue) continue;
    const Value& v = graph.value(node.inputs[i]);
    input_types[i] = &v.type;
    input_names[i] = v.name;
    if (v.constant) {
      value_views[i] = v.constant->view();
      input_values[i] = &value_views[i];
    }
  }
  std::vector<TensorType> outputs(node.outputs.size());
  InferContext ctx(node, input_types, input_values, &outputs, input_names);
  run_shape_inference(schema, ctx);
  return outputs;
}

void run_shape_inference(const OpSchema& schema, InferContext& ctx) {
  if (!schema.boxed_values) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (ctx.has_input(i) && !ctx.input_type(i).is_tensor()) {
        ctx.fail(ctx.input_label(i), " is a ", ctx.input_type(i).to_string(), ", but ", ctx.node().op_type,
                 " takes tensors only");
      }
    }
  }
  if (!schema.strings) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      if (ctx.has_input(i) && ctx.input_type(i).dtype == DType::kString) {
        throw_unsupported(ctx.node().describe(), ": ", ctx.input_label(i), " is a string tensor, which ", ctx.node().op_type,
                          " does not take (string tensors go through Identity, Cast, CastLike and StringNormalizer)");
      }
    }
  }
  schema.infer(ctx);
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (!schema.strings && ctx.output(i).dtype == DType::kString) {
      throw_unsupported(ctx.node().describe(), ": output ", i, " would be a string tensor, which ", ctx.node().op_type,
                        " cannot make");
    }
    const TensorType& t = ctx.output(i);
    if (t.rank_known) {  // runs on every node run of a subgraph or open-dims plan
      check_tensor_size_lazy([&] { return ctx.node().describe() + ": output " + std::to_string(i); }, t.dims, t.dtype);
    }
  }
}

bool is_bf16_compute_op_type(const std::string& op_type) {
  static const std::set<std::string> ops = [] {
    std::set<std::string> names;
    for (const OpSchema* schema : OpRegistry::instance().all()) {
      if (schema->bf16_compute && schema->domain.empty()) names.insert(schema->op_type);
    }
    return names;
  }();
  return ops.count(op_type) != 0;
}

}  // namespace tessera
