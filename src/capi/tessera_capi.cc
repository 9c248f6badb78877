// The C API: converts between DLPack and Tessera tensors, and every exception
// into a tsr_status. Nothing here throws.
#include <cstring>
#include <exception>
#include <iterator>
#include <new>
#include <string>
#include <vector>

#include "frontend/onnx/onnx_importer.h"
#include "ir/error.h"
#include "runtime/session.h"
#include "tessera/tessera.h"

struct tsr_status {
  tsr_status_code code;
  std::string message;
};

struct tsr_options {
  tessera::CompileOptions compile;
  tessera::onnx_frontend::ImportOptions import;
};

struct tsr_model {
  std::unique_ptr<tessera::CompiledModel> compiled;
  std::vector<std::string> input_names, output_names;
};

namespace {

using tessera::DType;

tsr_status* make_status(tsr_status_code code, std::string message) {
  return new (std::nothrow) tsr_status{code, std::move(message)};
}

template <typename Fn>
tsr_status* guarded(Fn&& fn) {
  try {
    fn();
    return nullptr;
  } catch (const tessera::Error& e) {
    tsr_status_code code = e.kind() == tessera::ErrorKind::kUser          ? TSR_INVALID_ARGUMENT
                           : e.kind() == tessera::ErrorKind::kUnsupported ? TSR_UNSUPPORTED
                                                                          : TSR_INTERNAL;
    return make_status(code, e.what());
  } catch (const std::bad_alloc&) {
    return make_status(TSR_INTERNAL, "out of memory");
  } catch (const std::exception& e) {
    return make_status(TSR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return make_status(TSR_INTERNAL, "internal error: unknown exception");
  }
}

DLDataType to_dl(DType dtype) {
  DLDataType t{kDLFloat, 32, 1};
  switch (dtype) {
    case DType::kFloat32: t = {kDLFloat, 32, 1}; break;
    case DType::kFloat16: t = {kDLFloat, 16, 1}; break;
    case DType::kFloat64: t = {kDLFloat, 64, 1}; break;
    case DType::kBFloat16: t = {kDLBfloat, 16, 1}; break;
    case DType::kInt8: t = {kDLInt, 8, 1}; break;
    case DType::kInt16: t = {kDLInt, 16, 1}; break;
    case DType::kInt32: t = {kDLInt, 32, 1}; break;
    case DType::kInt64: t = {kDLInt, 64, 1}; break;
    case DType::kUInt8: t = {kDLUInt, 8, 1}; break;
    case DType::kUInt16: t = {kDLUInt, 16, 1}; break;
    case DType::kUInt32: t = {kDLUInt, 32, 1}; break;
    case DType::kUInt64: t = {kDLUInt, 64, 1}; break;
    case DType::kBool: t = {TSR_DL_BOOL_CODE, 8, 1}; break;
    case DType::kUndefined: t = {kDLOpaqueHandle, 0, 0}; break;
  }
  return t;
}

DType from_dl(DLDataType t, const std::string& what) {
  if (t.lanes != 1) tessera::throw_user_error(what, ": vector dtypes (lanes != 1) are not supported");
  switch (t.code) {
    case kDLFloat:
      if (t.bits == 32) return DType::kFloat32;
      if (t.bits == 16) return DType::kFloat16;
      if (t.bits == 64) return DType::kFloat64;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::kBFloat16;
      break;
    case kDLInt:
      if (t.bits == 8) return DType::kInt8;
      if (t.bits == 16) return DType::kInt16;
      if (t.bits == 32) return DType::kInt32;
      if (t.bits == 64) return DType::kInt64;
      break;
    case kDLUInt:
      if (t.bits == 8) return DType::kUInt8;
      if (t.bits == 16) return DType::kUInt16;
      if (t.bits == 32) return DType::kUInt32;
      if (t.bits == 64) return DType::kUInt64;
      if (t.bits == 1) return DType::kBool;
      break;
    case TSR_DL_BOOL_CODE:
      if (t.bits == 8) return DType::kBool;
      break;
    default:
      break;
  }
  tessera::throw_user_error(what, ": unsupported DLPack dtype (code ", static_cast<int>(t.code), ", bits ",
                            static_cast<int>(t.bits), ")");
}

tessera::TensorView view_of(const DLTensor& t, const std::string& what) {
  if (t.device.device_type != kDLCPU) tessera::throw_user_error(what, ": only CPU tensors (kDLCPU) are supported");
  if (t.ndim < 0) tessera::throw_user_error(what, ": negative ndim");
  tessera::TensorView view;
  view.dtype = from_dl(t.dtype, what);
  if (t.ndim > 0 && !t.shape) tessera::throw_user_error(what, ": shape is NULL");
  view.shape.assign(t.shape, t.shape + t.ndim);
  for (int64_t d : view.shape) {
    if (d < 0) tessera::throw_user_error(what, ": negative dimension");
  }
  if (t.strides) {  // compact row-major strides are accepted
    int64_t expected = 1;
    for (int32_t i = t.ndim; i-- > 0;) {
      if (view.shape[static_cast<size_t>(i)] != 1 && t.strides[i] != expected) {
        tessera::throw_user_error(what, ": only contiguous row-major tensors are supported");
      }
      expected *= view.shape[static_cast<size_t>(i)];
    }
  }
  view.data = static_cast<char*>(t.data) + t.byte_offset;
  return view;
}

struct ManagedOutput {
  tessera::Tensor tensor;
  std::vector<int64_t> shape;
  DLManagedTensor managed;
};

void delete_managed(DLManagedTensor* self) { delete static_cast<ManagedOutput*>(self->manager_ctx); }

tsr_status* null_argument(const char* name) {
  return make_status(TSR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

tsr_status* fill_info(const tessera::ValueDesc& desc, tsr_value_info* out) {
  if (!out) return null_argument("out_info");
  if (out->struct_size < sizeof(tsr_value_info)) return make_status(TSR_INVALID_ARGUMENT, "out_info->struct_size is too small");
  out->name = desc.name.c_str();
  out->dtype = to_dl(desc.dtype);
  out->ndim = static_cast<int32_t>(desc.shape.size());
  out->shape = desc.shape.data();
  return nullptr;
}

std::vector<tessera::TensorView> input_views(const tsr_model* model, const DLTensor* inputs, size_t num_inputs) {
  if (num_inputs && !inputs) tessera::throw_user_error("inputs is NULL");
  const auto& descs = model->compiled->inputs();
  if (num_inputs != descs.size()) {
    tessera::throw_user_error("the model has ", descs.size(), " inputs but ", num_inputs, " were given");
  }
  std::vector<tessera::TensorView> views;
  for (size_t i = 0; i < num_inputs; ++i) views.push_back(view_of(inputs[i], "input '" + descs[i].name + "'"));
  return views;
}

}  // namespace

namespace {

tsr_status* run_alloc(const tsr_model* model, const DLTensor* inputs, size_t num_inputs, DLManagedTensor** out_outputs,
                      size_t num_outputs, double* out_node_milliseconds, size_t num_nodes) {
  if (!model) return null_argument("model");
  if (!out_outputs) return null_argument("out_outputs");
  return guarded([&] {
    std::vector<tessera::TensorView> in = input_views(model, inputs, num_inputs);
    if (num_outputs != model->compiled->outputs().size()) {
      tessera::throw_user_error("the model has ", model->compiled->outputs().size(), " outputs but room for ",
                                num_outputs, " was given");
    }
    std::vector<double> node_ms;
    if (out_node_milliseconds && num_nodes != model->compiled->placement().size()) {
      tessera::throw_user_error("the model has ", model->compiled->placement().size(), " nodes but room for ",
                                num_nodes, " times was given");
    }
    std::vector<tessera::Tensor> results =
        model->compiled->run(in, {}, out_node_milliseconds ? &node_ms : nullptr);
    for (size_t i = 0; i < node_ms.size(); ++i) out_node_milliseconds[i] += node_ms[i];
    for (size_t i = 0; i < results.size(); ++i) {
      auto* holder = new ManagedOutput();
      holder->tensor = results[i];
      holder->shape = results[i].shape();
      DLTensor& t = holder->managed.dl_tensor;
      t.data = holder->tensor.data();
      t.device = {kDLCPU, 0};
      t.ndim = static_cast<int32_t>(holder->shape.size());
      t.dtype = to_dl(holder->tensor.dtype());
      t.shape = holder->shape.data();
      t.strides = nullptr;
      t.byte_offset = 0;
      holder->managed.manager_ctx = holder;
      holder->managed.deleter = delete_managed;
      out_outputs[i] = &holder->managed;
    }
  });
}

}  // namespace

extern "C" {

tsr_status_code tsr_status_code_of(const tsr_status* status) { return status ? status->code : TSR_OK; }
const char* tsr_status_message(const tsr_status* status) { return status ? status->message.c_str() : ""; }
void tsr_status_free(tsr_status* status) { delete status; }

tsr_status* tsr_options_create(tsr_options** out_options) {
  if (!out_options) return null_argument("out_options");
  return guarded([&] { *out_options = new tsr_options(); });
}
void tsr_options_free(tsr_options* options) { delete options; }

tsr_status* tsr_options_set_threads(tsr_options* options, int32_t num_threads) {
  if (!options) return null_argument("options");
  if (num_threads < 1 || num_threads > 1024) return make_status(TSR_INVALID_ARGUMENT, "threads must be between 1 and 1024");
  options->compile.num_threads = num_threads;
  return nullptr;
}

tsr_status* tsr_options_set_input_shape(tsr_options* options, const char* name, const int64_t* dims, size_t rank) {
  if (!options) return null_argument("options");
  if (!name) return null_argument("name");
  if (rank && !dims) return null_argument("dims");
  return guarded([&] { options->compile.input_shapes[name] = tessera::Shape(dims, dims + rank); });
}

tsr_status* tsr_options_set_freeze_weights(tsr_options* options, int32_t freeze) {
  if (!options) return null_argument("options");
  options->import.freeze_weights = freeze != 0;
  return nullptr;
}

tsr_status* tsr_model_load(const char* path, const tsr_options* options, tsr_model** out_model) {
  if (!path) return null_argument("path");
  if (!out_model) return null_argument("out_model");
  *out_model = nullptr;
  return guarded([&] {
    tsr_options defaults;
    const tsr_options& opts = options ? *options : defaults;
    tessera::Graph graph = tessera::onnx_frontend::import_onnx_file(path, opts.import);
    auto model = std::make_unique<tsr_model>();
    model->compiled = tessera::CompiledModel::compile(std::move(graph), opts.compile);
    *out_model = model.release();
  });
}

void tsr_model_free(tsr_model* model) { delete model; }

size_t tsr_model_input_count(const tsr_model* model) { return model ? model->compiled->inputs().size() : 0; }
size_t tsr_model_output_count(const tsr_model* model) { return model ? model->compiled->outputs().size() : 0; }

tsr_status* tsr_model_input_info(const tsr_model* model, size_t index, tsr_value_info* out_info) {
  if (!model) return null_argument("model");
  if (index >= model->compiled->inputs().size()) return make_status(TSR_INVALID_ARGUMENT, "input index out of range");
  return fill_info(model->compiled->inputs()[index], out_info);
}

tsr_status* tsr_model_output_info(const tsr_model* model, size_t index, tsr_value_info* out_info) {
  if (!model) return null_argument("model");
  if (index >= model->compiled->outputs().size()) return make_status(TSR_INVALID_ARGUMENT, "output index out of range");
  return fill_info(model->compiled->outputs()[index], out_info);
}

size_t tsr_model_node_count(const tsr_model* model) { return model ? model->compiled->placement().size() : 0; }

tsr_status* tsr_model_node_placement(const tsr_model* model, size_t index, const char** out_node_name,
                                     const char** out_op_type, const char** out_backend) {
  if (!model) return null_argument("model");
  const auto& placement = model->compiled->placement();
  if (index >= placement.size()) return make_status(TSR_INVALID_ARGUMENT, "node index out of range");
  if (out_node_name) *out_node_name = placement[index].node_name.c_str();
  if (out_op_type) *out_op_type = placement[index].op_type.c_str();
  if (out_backend) *out_backend = placement[index].backend.c_str();
  return nullptr;
}

tsr_status* tsr_model_node_note(const tsr_model* model, size_t index, const char** out_note) {
  if (!model) return null_argument("model");
  if (!out_note) return null_argument("out_note");
  const auto& placement = model->compiled->placement();
  if (index >= placement.size()) return make_status(TSR_INVALID_ARGUMENT, "node index out of range");
  *out_note = placement[index].note.c_str();
  return nullptr;
}

size_t tsr_model_metadata_count(const tsr_model* model) { return model ? model->compiled->graph().metadata.size() : 0; }

tsr_status* tsr_model_metadata(const tsr_model* model, size_t index, const char** out_key, const char** out_value) {
  if (!model) return null_argument("model");
  const auto& metadata = model->compiled->graph().metadata;
  if (index >= metadata.size()) return make_status(TSR_INVALID_ARGUMENT, "metadata index out of range");
  auto it = std::next(metadata.begin(), static_cast<std::ptrdiff_t>(index));
  if (out_key) *out_key = it->first.c_str();
  if (out_value) *out_value = it->second.c_str();
  return nullptr;
}

int64_t tsr_model_arena_bytes(const tsr_model* model) { return model ? model->compiled->memory_plan().arena_bytes : 0; }
int64_t tsr_model_constant_bytes(const tsr_model* model) { return model ? model->compiled->constant_bytes() : 0; }
int64_t tsr_model_parameter_count(const tsr_model* model) { return model ? model->compiled->parameter_count() : 0; }

tsr_status* tsr_model_run(const tsr_model* model, const DLTensor* inputs, size_t num_inputs, DLTensor* outputs,
                          size_t num_outputs) {
  if (!model) return null_argument("model");
  return guarded([&] {
    std::vector<tessera::TensorView> in = input_views(model, inputs, num_inputs);
    const auto& descs = model->compiled->outputs();
    if (num_outputs != descs.size()) {
      tessera::throw_user_error("the model has ", descs.size(), " outputs but ", num_outputs, " were given");
    }
    if (num_outputs && !outputs) tessera::throw_user_error("outputs is NULL");
    std::vector<tessera::TensorView> out_views;
    out_views.reserve(num_outputs);
    for (size_t i = 0; i < num_outputs; ++i) out_views.push_back(view_of(outputs[i], "output '" + descs[i].name + "'"));
    std::vector<tessera::TensorView*> out_ptrs;
    for (auto& v : out_views) out_ptrs.push_back(&v);
    model->compiled->run(in, out_ptrs);
  });
}

tsr_status* tsr_model_run_alloc(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                DLManagedTensor** out_outputs, size_t num_outputs) {
  return run_alloc(model, inputs, num_inputs, out_outputs, num_outputs, nullptr, 0);
}

tsr_status* tsr_model_run_profiled(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                   DLManagedTensor** out_outputs, size_t num_outputs, double* out_node_milliseconds,
                                   size_t num_nodes) {
  if (!out_node_milliseconds) return null_argument("out_node_milliseconds");
  return run_alloc(model, inputs, num_inputs, out_outputs, num_outputs, out_node_milliseconds, num_nodes);
}

}  // extern "C"
