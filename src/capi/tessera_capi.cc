// The C API: converts between DLPack and Tessera tensors, and every exception
// into a tsr_status. Nothing here throws.
#include <sys/stat.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iterator>
#include <algorithm>
#include <map>
#include <mutex>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/safe_file.h"
#include "frontend/onnx/onnx_importer.h"
#include "ir/error.h"
#include "ir/shape_util.h"
#include "quantize/quantize.h"
#include "report/check_report.h"
#include "report/placement_report.h"
#include "runtime/backend_registry.h"
#include "runtime/session.h"
#include "tessera/tessera.h"
#include "tune/tuner.h"

struct tsr_status {
  tsr_status_code code;
  std::string message;
};

struct tsr_options {
  tessera::CompileOptions compile;
  tessera::onnx_frontend::ImportOptions import;
  // tsr_options_set_input_data_shape: bound only to inputs the model has.
  std::map<std::string, tessera::Shape> data_shapes;
};

/// The dim_names arrays tsr_value_info hands out, per input or output.
struct tsr_dim_name_arrays {
  std::vector<std::vector<const char*>> inputs, outputs;

  void build(const std::vector<tessera::ValueDesc>& in, const std::vector<tessera::ValueDesc>& out) {
    auto pointers = [](const std::vector<tessera::ValueDesc>& descs) {
      std::vector<std::vector<const char*>> all;
      for (const tessera::ValueDesc& d : descs) {
        std::vector<const char*> names;
        for (const std::string& n : d.dim_names) names.push_back(n.c_str());
        names.resize(d.shape.size(), "");
        all.push_back(std::move(names));
      }
      return all;
    };
    inputs = pointers(in);
    outputs = pointers(out);
  }
};

/// A value of any kind: a tensor (items[0]), a sequence (items), an optional
/// (present, and then its tensor or sequence in items). Immutable once made.
struct tsr_value {
  tessera::ValueKind kind = tessera::ValueKind::kTensor;
  bool present = true;
  std::vector<tessera::Tensor> items;
  std::vector<DLTensor> dl;  // per item, built once the items are final
};

struct tsr_model {
  std::unique_ptr<tessera::CompiledModel> compiled;
  tsr_dim_name_arrays dim_names;
  std::string warnings;  // compiled->warnings(), one per line
  /// Why the tensor-only run functions refuse this model (its first sequence, optional or string
  /// input or output), or "": decided once here, not on every run.
  std::string tensor_run_refusal;

  explicit tsr_model(std::unique_ptr<tessera::CompiledModel> model) : compiled(std::move(model)) {
    dim_names.build(compiled->inputs(), compiled->outputs());
    for (const std::string& w : compiled->warnings()) warnings += w + "\n";
    auto refuse = [&](const tessera::ValueDesc& d, const char* what) {
      if (!tensor_run_refusal.empty()) return;
      if (d.kind != tessera::ValueKind::kTensor) {
        tensor_run_refusal = tessera::str_cat(what, " '", d.name, "' is ", tessera::value_kind_phrase(d.kind),
                                              "; run the model with tsr_model_run_values");
      } else if (d.dtype == tessera::DType::kString) {
        tensor_run_refusal = tessera::str_cat(what, " '", d.name, "' is a string tensor; run the model with tsr_model_run_values");
      }
    };
    for (const tessera::ValueDesc& d : compiled->inputs()) refuse(d, "input");
    for (const tessera::ValueDesc& d : compiled->outputs()) refuse(d, "output");
  }
};

struct tsr_quantizer {
  std::unique_ptr<tessera::quantize::Quantizer> quantizer;
  std::vector<tessera::ValueDesc> inputs;  // the model's declared inputs (open dims -1)
};

struct tsr_source {
  tessera::Graph graph;  // as imported: input shapes not bound
  std::vector<tessera::ValueDesc> inputs, outputs;
  std::vector<bool> output_rank_known;
  tsr_dim_name_arrays dim_names;
};

namespace {

using tessera::DType;
using tessera::str_cat;

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

using MallocString = std::unique_ptr<char, void (*)(void*)>;

/// `text` in memory the caller frees with tsr_string_free (std::free); throws std::bad_alloc.
MallocString malloc_string(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, text.c_str(), text.size() + 1);
  return {out, std::free};
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
    case DType::kString: t = {TSR_DL_STRING_CODE, 8, 1}; break;
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

/// The caller's tensor for `desc`, checked field by field against what the
/// model has (device, rank before the shape is read, dtype, dims, strides,
/// data and its alignment), so no bad tensor reaches a kernel.
tessera::TensorView view_of(const DLTensor& t, const tessera::ValueDesc& desc, const std::string& what) {
  if (t.device.device_type != kDLCPU) tessera::throw_user_error(what, ": only CPU tensors (kDLCPU) are supported");
  tessera::TensorView view;
  view.dtype = from_dl(t.dtype, what);
  const std::string expected = str_cat(tessera::dtype_name(desc.dtype), "[", tessera::shape_to_string(desc.shape), "]");
  if (t.ndim != static_cast<int64_t>(desc.shape.size())) {
    tessera::throw_user_error(what, ": expected ", expected, ", got a tensor of ", t.ndim, " dimensions");
  }
  if (t.ndim > 0 && !t.shape) tessera::throw_user_error(what, ": shape is NULL");
  view.shape.assign(t.shape, t.shape + t.ndim);
  for (size_t i = 0; i < view.shape.size(); ++i) {
    if (view.shape[i] < 0) tessera::throw_user_error(what, ": dimension ", i, " is ", view.shape[i]);
  }
  for (int64_t d : desc.shape) {
    if (d < 0) {
      tessera::throw_user_error(what, ": its shape (", tessera::shape_to_string(desc.shape),
                                ") is only known after running; use tsr_model_run_alloc");
    }
  }
  if (view.dtype != desc.dtype || view.shape != desc.shape) {
    tessera::throw_user_error(what, ": expected ", expected, ", got ", tessera::dtype_name(view.dtype), "[",
                              tessera::shape_to_string(view.shape), "]");
  }
  if (t.strides) {  // compact row-major strides are accepted
    int64_t stride = 1;
    for (int32_t i = t.ndim; i-- > 0;) {
      if (view.shape[static_cast<size_t>(i)] != 1 && t.strides[i] != stride) {
        tessera::throw_user_error(what, ": only contiguous row-major tensors are supported");
      }
      stride *= view.shape[static_cast<size_t>(i)];
    }
  }
  if (view.nbytes() == 0) return view;  // an empty tensor may have no data
  if (!t.data) tessera::throw_user_error(what, ": data is NULL");
  view.data = static_cast<char*>(t.data) + t.byte_offset;
  if (reinterpret_cast<uintptr_t>(view.data) % tessera::dtype_size(view.dtype) != 0) {
    tessera::throw_user_error(what, ": data (with byte_offset) is not aligned to its ", tessera::dtype_size(view.dtype),
                              "-byte elements");
  }
  return view;
}

/// Throws when a caller's output buffer shares bytes with an input or another
/// output: a kernel would read what it already overwrote, or two outputs would
/// race for the same bytes.
void check_no_overlap(const std::vector<tessera::TensorView>& inputs, const std::vector<tessera::TensorView>& outputs,
                      const tsr_model* model) {
  auto overlap = [](const tessera::TensorView& a, const tessera::TensorView& b) {
    if (!a.data || !b.data || a.nbytes() == 0 || b.nbytes() == 0) return false;
    const auto a_begin = reinterpret_cast<uintptr_t>(a.data), b_begin = reinterpret_cast<uintptr_t>(b.data);
    return a_begin < b_begin + b.nbytes() && b_begin < a_begin + a.nbytes();
  };
  const auto& in = model->compiled->inputs();
  const auto& out = model->compiled->outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (overlap(outputs[i], inputs[j])) {
        tessera::throw_user_error("output '", out[i].name, "': its buffer overlaps input '", in[j].name, "'");
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (overlap(outputs[i], outputs[j])) {
        tessera::throw_user_error("output '", out[i].name, "': its buffer overlaps output '", out[j].name, "'");
      }
    }
  }
}

struct ManagedOutput {
  tessera::Tensor tensor;
  std::vector<int64_t> shape;
  DLManagedTensor managed;
};

void delete_managed(DLManagedTensor* self) { delete static_cast<ManagedOutput*>(self->manager_ctx); }

/// A shape given for input or symbolic dimension `name`: every dimension is a size, >= 0.
tessera::Shape checked_shape(const char* name, const int64_t* dims, size_t rank) {
  tessera::Shape shape(dims, dims + rank);
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 0) {
      tessera::throw_user_error("the shape given for '", name, "' has a negative dimension (", shape[i],
                                " at position ", i, "); dimensions are sizes, 0 or more");
    }
  }
  return shape;
}

/// Throws unless `path` is a regular file (links followed): a directory gives
/// no bytes, and opening a FIFO would block until a writer comes.
void check_model_file(const char* path) {
  struct stat info {};
  if (::stat(path, &info) != 0) return;  // the loader reports a missing or unreadable file
  if (!S_ISREG(info.st_mode)) {
    tessera::throw_user_error("'", path, "' is ", S_ISDIR(info.st_mode) ? "a directory" : S_ISFIFO(info.st_mode) ? "a FIFO" : "not a regular file",
                              ", not a model file");
  }
}

tsr_status* null_argument(const char* name) {
  return make_status(TSR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

tsr_status* fill_info(const tessera::ValueDesc& desc, const std::vector<const char*>& dim_names, bool rank_known,
                      tsr_value_info* out) {
  if (!out) return null_argument("out_info");
  // dim_names was appended: a caller built before it has a smaller struct and does not get it.
  if (out->struct_size < offsetof(tsr_value_info, dim_names)) {
    return make_status(TSR_INVALID_ARGUMENT, "out_info->struct_size is too small");
  }
  out->name = desc.name.c_str();
  out->dtype = to_dl(desc.dtype);
  out->ndim = rank_known ? static_cast<int32_t>(desc.shape.size()) : -1;
  out->shape = rank_known ? desc.shape.data() : nullptr;
  if (out->struct_size >= offsetof(tsr_value_info, kind) + sizeof(int32_t)) {
    out->dim_names = rank_known ? dim_names.data() : nullptr;
    out->kind = static_cast<int32_t>(desc.kind);
  } else if (out->struct_size >= offsetof(tsr_value_info, dim_names) + sizeof(const char* const*)) {
    out->dim_names = rank_known ? dim_names.data() : nullptr;
  }
  return nullptr;
}

/// The compile options for `graph`: shapes from data bound only to the tensor inputs the model has
/// (an optional tensor's data says nothing of the shapes the model is compiled for).
tessera::CompileOptions compile_options_for(const tessera::Graph& graph, const tsr_options& opts) {
  tessera::CompileOptions compile = opts.compile;
  for (const auto& [name, shape] : opts.data_shapes) {
    bool is_input = false;
    for (tessera::ValueId id : graph.inputs) is_input |= graph.value(id).name == name && graph.value(id).type.is_tensor();
    if (is_input) compile.input_shapes.emplace(name, shape);  // a shape set by name wins
  }
  return compile;
}

/// Compiles an ONNX graph with the options.
std::unique_ptr<tessera::CompiledModel> compile_graph(tessera::Graph graph, const tsr_options& opts) {
  tessera::CompileOptions compile = compile_options_for(graph, opts);
  return tessera::CompiledModel::compile(std::move(graph), compile);
}

/// The ONNX model at `path`, imported; an artifact there is a user error, `if_artifact` ending its message.
tessera::Graph import_model_file(const char* path, const tsr_options& opts, const char* if_artifact) {
  check_model_file(path);
  if (tessera::is_artifact_file(path)) tessera::throw_user_error("'", path, "' is a compiled artifact", if_artifact);
  return tessera::onnx_frontend::import_onnx_file(path, opts.import);
}

tsr_source* make_source(tessera::Graph graph) {
  auto source = std::make_unique<tsr_source>();
  source->graph = std::move(graph);
  const tessera::Graph& g = source->graph;
  for (tessera::ValueId id : g.inputs) {
    const tessera::TensorType& t = g.value(id).type;
    std::vector<std::string> names = t.symbols;
    names.resize(t.dims.size());
    source->inputs.push_back({g.value(id).name, t.kind, t.dtype, t.dims, names, t.rank_known});
  }
  for (tessera::ValueId id : g.outputs) {
    const tessera::TensorType& t = g.value(id).type;
    std::vector<std::string> names = t.symbols;
    names.resize(t.rank_known ? t.dims.size() : 0);
    source->outputs.push_back({g.value(id).name, t.kind, t.dtype, t.rank_known ? t.dims : tessera::Shape{}, names});
    source->output_rank_known.push_back(t.rank_known);
  }
  source->dim_names.build(source->inputs, source->outputs);
  return source.release();
}

std::vector<tessera::TensorView> input_views(const tsr_model* model, const DLTensor* inputs, size_t num_inputs) {
  if (num_inputs && !inputs) tessera::throw_user_error("inputs is NULL");
  if (!model->tensor_run_refusal.empty()) tessera::throw_unsupported(model->tensor_run_refusal);
  const auto& descs = model->compiled->inputs();
  if (num_inputs != descs.size()) {
    tessera::throw_user_error("the model has ", descs.size(), " inputs but ", num_inputs, " were given");
  }
  std::vector<tessera::TensorView> views;
  for (size_t i = 0; i < num_inputs; ++i) views.push_back(view_of(inputs[i], descs[i], "input '" + descs[i].name + "'"));
  return views;
}

/// A caller's tsr_run_profile: big enough, with arrays (where given) of the model's node and region counts.
void check_profile(const tsr_run_profile& profile, const tsr_model* model) {
  // region_fallbacks was appended: a profile without it is still whole.
  if (profile.struct_size < offsetof(tsr_run_profile, region_fallbacks)) tessera::throw_user_error("profile->struct_size is too small");
  if (profile.node_milliseconds && profile.num_nodes != model->compiled->placement().size()) {
    tessera::throw_user_error("the model has ", model->compiled->placement().size(), " nodes but room for ",
                              profile.num_nodes, " times was given");
  }
  const bool fallbacks = profile.struct_size >= sizeof(tsr_run_profile) && profile.region_fallbacks;
  if ((profile.region_milliseconds || fallbacks) && profile.num_regions != model->compiled->regions().size()) {
    tessera::throw_user_error("the model has ", model->compiled->regions().size(), " regions but room for ",
                              profile.num_regions, " times was given");
  }
}

}  // namespace

namespace {

tsr_status* run_alloc(const tsr_model* model, const DLTensor* inputs, size_t num_inputs, DLManagedTensor** out_outputs,
                      size_t num_outputs, tsr_run_profile* profile) {
  if (!model) return null_argument("model");
  if (!out_outputs) return null_argument("out_outputs");
  for (size_t i = 0; i < num_outputs; ++i) out_outputs[i] = nullptr;
  return guarded([&] {
    std::vector<tessera::TensorView> in = input_views(model, inputs, num_inputs);
    if (num_outputs != model->compiled->outputs().size()) {
      tessera::throw_user_error("the model has ", model->compiled->outputs().size(), " outputs but room for ",
                                num_outputs, " was given");
    }
    tessera::RunProfile measured;
    if (profile) check_profile(*profile, model);
    std::vector<tessera::Tensor> results = model->compiled->run(in, {}, profile ? &measured : nullptr);
    if (profile) {
      if (profile->node_milliseconds) {
        for (size_t i = 0; i < measured.node_milliseconds.size(); ++i) profile->node_milliseconds[i] += measured.node_milliseconds[i];
      }
      if (profile->region_milliseconds) {
        for (size_t i = 0; i < measured.region_milliseconds.size(); ++i) profile->region_milliseconds[i] += measured.region_milliseconds[i];
      }
      profile->copies += measured.copies;
      profile->copy_bytes += measured.copy_bytes;
      if (profile->struct_size >= sizeof(tsr_run_profile) && profile->region_fallbacks) {
        for (size_t i = 0; i < measured.region_fallbacks.size(); ++i) profile->region_fallbacks[i] += measured.region_fallbacks[i];
      }
    }
    // Built in full before any is handed out: on a failure the caller owns nothing.
    std::vector<std::unique_ptr<ManagedOutput>> holders;
    for (size_t i = 0; i < results.size(); ++i) {
      holders.push_back(std::make_unique<ManagedOutput>());
      ManagedOutput* holder = holders.back().get();
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
    }
    for (size_t i = 0; i < holders.size(); ++i) out_outputs[i] = &holders[i].release()->managed;
  });
}

/// Finishes a value: the DLTensor view of each item.
tsr_value* finish_value(std::unique_ptr<tsr_value> value) {
  value->dl.clear();
  for (const tessera::Tensor& t : value->items) {
    DLTensor d{};
    d.data = t.dtype() == DType::kString ? nullptr : t.data();
    d.device = {kDLCPU, 0};
    d.ndim = static_cast<int32_t>(t.shape().size());
    d.dtype = to_dl(t.dtype());
    d.shape = const_cast<int64_t*>(t.shape().data());
    d.strides = nullptr;
    d.byte_offset = 0;
    value->dl.push_back(d);
  }
  return value.release();
}

/// A value's tensor for a tensor input, or throws naming the input.
const tessera::Tensor& tensor_of(const tsr_value* value, const std::string& what) {
  if (value->kind != tessera::ValueKind::kTensor) {
    tessera::throw_user_error(what, " is a tensor, but ", tessera::value_kind_phrase(value->kind), " was given");
  }
  return value->items.front();
}

}  // namespace

extern "C" {

tsr_status* tsr_value_create_tensor(const DLTensor* tensor, tsr_value** out_value) {
  if (!out_value) return null_argument("out_value");
  *out_value = nullptr;
  if (!tensor) return null_argument("tensor");
  return guarded([&] {
    if (tensor->ndim < 0 || tensor->ndim > 64) tessera::throw_user_error("tensor: ndim ", tensor->ndim, " is out of range");
    if (tensor->ndim > 0 && !tensor->shape) tessera::throw_user_error("tensor: shape is NULL");
    tessera::ValueDesc desc;
    desc.name = "tensor";
    desc.dtype = from_dl(tensor->dtype, "tensor");
    if (desc.dtype == DType::kString) tessera::throw_user_error("tensor: a string tensor is made with tsr_value_create_strings");
    desc.shape.assign(tensor->shape, tensor->shape + tensor->ndim);
    for (int64_t d : desc.shape) {
      if (d < 0) tessera::throw_user_error("tensor: a dimension is negative (", d, ")");
    }
    tessera::check_tensor_size("tensor", desc.shape, desc.dtype);
    const tessera::TensorView view = view_of(*tensor, desc, "tensor");
    auto value = std::make_unique<tsr_value>();
    value->items.push_back(tessera::Tensor::from_view(view));
    *out_value = finish_value(std::move(value));
  });
}

tsr_status* tsr_value_create_strings(const char* const* strings, const size_t* lengths, const int64_t* shape,
                                     int32_t ndim, tsr_value** out_value) {
  if (!out_value) return null_argument("out_value");
  *out_value = nullptr;
  return guarded([&] {
    if (ndim < 0 || ndim > 64) tessera::throw_user_error("strings: ndim ", ndim, " is out of range");
    if (ndim > 0 && !shape) tessera::throw_user_error("strings: shape is NULL");
    tessera::Shape dims(shape, shape + ndim);
    for (int64_t d : dims) {
      if (d < 0) tessera::throw_user_error("strings: a dimension is negative (", d, ")");
    }
    tessera::check_tensor_size("strings", dims, DType::kString);
    tessera::Tensor t(DType::kString, dims);
    if (t.numel() > 0 && !strings) tessera::throw_user_error("strings is NULL");
    for (int64_t i = 0; i < t.numel(); ++i) {
      if (!strings[i]) tessera::throw_user_error("strings: element ", i, " is NULL");
      t.as<std::string>()[i] = lengths ? std::string(strings[i], lengths[i]) : std::string(strings[i]);
    }
    auto value = std::make_unique<tsr_value>();
    value->items.push_back(std::move(t));
    *out_value = finish_value(std::move(value));
  });
}

tsr_status* tsr_value_create_sequence(const tsr_value* const* items, size_t count, tsr_value** out_value) {
  if (!out_value) return null_argument("out_value");
  *out_value = nullptr;
  if (count && !items) return null_argument("items");
  return guarded([&] {
    auto value = std::make_unique<tsr_value>();
    value->kind = tessera::ValueKind::kSequence;
    for (size_t i = 0; i < count; ++i) {
      if (!items[i]) tessera::throw_user_error("items[", i, "] is NULL");
      const tessera::Tensor& t = tensor_of(items[i], str_cat("items[", i, "]"));
      if (!value->items.empty() && t.dtype() != value->items.front().dtype()) {
        tessera::throw_user_error("items[", i, "] is ", tessera::dtype_name(t.dtype()), " but items[0] is ",
                                  tessera::dtype_name(value->items.front().dtype()), "; a sequence holds one dtype");
      }
      value->items.push_back(t);
    }
    *out_value = finish_value(std::move(value));
  });
}

tsr_status* tsr_value_create_optional(const tsr_value* content, tsr_value_kind kind, tsr_value** out_value) {
  if (!out_value) return null_argument("out_value");
  *out_value = nullptr;
  return guarded([&] {
    auto value = std::make_unique<tsr_value>();
    if (!content) {
      if (kind != TSR_VALUE_OPTIONAL_TENSOR && kind != TSR_VALUE_OPTIONAL_SEQUENCE) {
        tessera::throw_user_error("kind must be TSR_VALUE_OPTIONAL_TENSOR or TSR_VALUE_OPTIONAL_SEQUENCE, got ",
                                  static_cast<int>(kind));
      }
      value->kind = static_cast<tessera::ValueKind>(kind);
      value->present = false;
    } else if (content->kind == tessera::ValueKind::kTensor || content->kind == tessera::ValueKind::kSequence) {
      value->kind = content->kind == tessera::ValueKind::kTensor ? tessera::ValueKind::kOptionalTensor
                                                                 : tessera::ValueKind::kOptionalSequence;
      value->items = content->items;
    } else {
      tessera::throw_user_error("content is already an optional");
    }
    *out_value = finish_value(std::move(value));
  });
}

void tsr_value_free(tsr_value* value) { delete value; }

tsr_status* tsr_value_describe(const tsr_value* value, int32_t* out_kind, int32_t* out_present, size_t* out_tensor_count) {
  if (!value) return null_argument("value");
  if (out_kind) *out_kind = static_cast<int32_t>(value->kind);
  if (out_present) *out_present = value->present ? 1 : 0;
  if (out_tensor_count) *out_tensor_count = value->items.size();
  return nullptr;
}

tsr_status* tsr_value_tensor(const tsr_value* value, size_t index, const DLTensor** out_tensor) {
  if (!value) return null_argument("value");
  if (!out_tensor) return null_argument("out_tensor");
  *out_tensor = nullptr;
  if (index >= value->dl.size()) {
    return make_status(TSR_INVALID_ARGUMENT, str_cat("tensor index ", index, " is out of range: the value holds ",
                                                     value->dl.size(), value->present ? "" : " (an empty optional)"));
  }
  *out_tensor = &value->dl[index];
  return nullptr;
}

tsr_status* tsr_value_string(const tsr_value* value, size_t index, int64_t element, const char** out_bytes,
                             size_t* out_length) {
  if (!value) return null_argument("value");
  if (!out_bytes) return null_argument("out_bytes");
  *out_bytes = nullptr;
  if (index >= value->items.size()) return make_status(TSR_INVALID_ARGUMENT, str_cat("tensor index ", index, " is out of range"));
  const tessera::Tensor& t = value->items[index];
  if (t.dtype() != DType::kString) {
    return make_status(TSR_INVALID_ARGUMENT, str_cat("tensor ", index, " is ", tessera::dtype_name(t.dtype()), ", not strings"));
  }
  if (element < 0 || element >= t.numel()) {
    return make_status(TSR_INVALID_ARGUMENT, str_cat("element ", element, " is out of range (", t.numel(), " strings)"));
  }
  const std::string& text = t.as<std::string>()[element];
  *out_bytes = text.c_str();
  if (out_length) *out_length = text.size();
  return nullptr;
}

tsr_status* tsr_model_run_values(const tsr_model* model, const tsr_value* const* inputs, size_t num_inputs,
                                 tsr_value** out_outputs, size_t num_outputs) {
  if (!model) return null_argument("model");
  if (!out_outputs) return null_argument("out_outputs");
  for (size_t i = 0; i < num_outputs; ++i) out_outputs[i] = nullptr;
  if (num_inputs && !inputs) return null_argument("inputs");
  return guarded([&] {
    const auto& descs = model->compiled->inputs();
    if (num_inputs != descs.size()) tessera::throw_user_error("the model has ", descs.size(), " inputs but ", num_inputs, " were given");
    if (num_outputs != model->compiled->outputs().size()) {
      tessera::throw_user_error("the model has ", model->compiled->outputs().size(), " outputs but room for ", num_outputs, " was given");
    }
    std::vector<tessera::TensorView> views(num_inputs);
    std::vector<tessera::BoxedValue> boxes(num_inputs);
    tessera::BoxedIO io;
    io.inputs.assign(num_inputs, nullptr);
    for (size_t i = 0; i < num_inputs; ++i) {
      const std::string what = "input '" + descs[i].name + "'";
      if (!inputs[i]) tessera::throw_user_error(what, " is NULL");
      if (descs[i].kind == tessera::ValueKind::kTensor) {
        views[i] = tensor_of(inputs[i], what).view();
        continue;
      }
      if (inputs[i]->kind == tessera::ValueKind::kTensor) {
        tessera::throw_user_error(what, " is ", tessera::value_kind_phrase(descs[i].kind), ", but a tensor was given");
      }
      boxes[i] = tessera::BoxedValue{inputs[i]->kind, inputs[i]->present, inputs[i]->items};
      io.inputs[i] = &boxes[i];
    }
    std::vector<tessera::Tensor> results = model->compiled->run(views, {}, nullptr, &io);
    std::vector<std::unique_ptr<tsr_value>> made;
    for (size_t i = 0; i < num_outputs; ++i) {
      auto value = std::make_unique<tsr_value>();
      if (model->compiled->outputs()[i].kind == tessera::ValueKind::kTensor) {
        value->items.push_back(results[i]);
      } else {
        value->kind = io.outputs[i].kind;
        value->present = io.outputs[i].present;
        value->items = io.outputs[i].items;
      }
      made.push_back(std::move(value));
    }
    // Built in full before any is handed out: on a failure the caller owns nothing.
    std::vector<tsr_value*> done;
    for (auto& v : made) done.push_back(finish_value(std::move(v)));
    for (size_t i = 0; i < done.size(); ++i) out_outputs[i] = done[i];
  });
}

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
  return guarded([&] { options->compile.input_shapes[name] = checked_shape(name, dims, rank); });
}

tsr_status* tsr_options_set_input_data_shape(tsr_options* options, const char* name, const int64_t* dims, size_t rank) {
  if (!options) return null_argument("options");
  if (!name) return null_argument("name");
  if (rank && !dims) return null_argument("dims");
  return guarded([&] { options->data_shapes[name] = checked_shape(name, dims, rank); });
}

tsr_status* tsr_options_set_freeze_weights(tsr_options* options, int32_t freeze) {
  if (!options) return null_argument("options");
  options->import.freeze_weights = freeze != 0;
  return nullptr;
}

tsr_status* tsr_options_set_backends(tsr_options* options, const char* backend_list) {
  if (!options) return null_argument("options");
  if (!backend_list) return null_argument("backend_list");
  return guarded([&] {
    std::vector<std::string> names;
    std::string list = backend_list;
    size_t start = 0;
    while (start <= list.size()) {
      size_t comma = list.find(',', start);
      if (comma == std::string::npos) comma = list.size();
      std::string name = list.substr(start, comma - start);
      if (name.empty()) tessera::throw_user_error("backend list '", list, "' has an empty name");
      if (!tessera::find_backend(name)) {
        tessera::throw_user_error("unknown backend '", name, "' (known: ", tessera::known_backend_names(),
                                  "; a plug-in backend is loaded with --backend-plugin PATH or TESSERA_BACKEND_PLUGINS)");
      }
      names.push_back(name);
      start = comma + 1;
    }
    options->compile.backends = std::move(names);
  });
}

tsr_status* tsr_options_add_placement(tsr_options* options, const char* placement) {
  if (!options) return null_argument("options");
  if (!placement) return null_argument("placement");
  return guarded([&] {
    std::string text = placement;
    const size_t eq = text.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size()) {
      tessera::throw_user_error("placement '", text, "' must be SELECTOR=BACKEND (e.g. conv_3=native or op:Softmax=native)");
    }
    options->compile.place.emplace_back(text.substr(0, eq), text.substr(eq + 1));
  });
}

tsr_status* tsr_options_add_denial(tsr_options* options, const char* denial) {
  if (!options) return null_argument("options");
  if (!denial) return null_argument("denial");
  return guarded([&] {
    std::string text = denial;
    const size_t colon = text.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
      tessera::throw_user_error("denial '", text, "' must be BACKEND:SELECTOR (e.g. test:Softmax or test:conv_3)");
    }
    options->compile.deny.emplace_back(text.substr(0, colon), text.substr(colon + 1));
  });
}

tsr_status* tsr_options_set_min_region_size(tsr_options* options, int32_t min_nodes) {
  if (!options) return null_argument("options");
  if (min_nodes < 1) return make_status(TSR_INVALID_ARGUMENT, "the minimum region size must be at least 1");
  options->compile.min_region_size = min_nodes;
  return nullptr;
}

tsr_status* tsr_options_set_strict(tsr_options* options, int32_t strict) {
  if (!options) return null_argument("options");
  options->compile.strict = strict != 0;
  return nullptr;
}

tsr_status* tsr_options_set_precision(tsr_options* options, const char* precision) {
  if (!options) return null_argument("options");
  if (!precision) return null_argument("precision");
  return guarded([&] { options->compile.precision = tessera::parse_precision(precision); });
}

size_t tsr_backend_count(void) {
  try {
    return tessera::all_backends().size();
  } catch (...) {
    return tessera::loaded_backends().size();
  }
}

tsr_status* tsr_backend_info(size_t index, const char** out_name, const char** out_description,
                             int32_t* out_used_by_default) {
  return guarded([&] {
    const std::vector<const tessera::BackendEntry*> entries = tessera::all_backends();
    if (index >= entries.size()) tessera::throw_user_error("backend index ", index, " out of range (", entries.size(), " backends)");
    if (out_name) *out_name = entries[index]->name.c_str();
    if (out_description) *out_description = entries[index]->description.c_str();
    if (out_used_by_default) *out_used_by_default = entries[index]->used_by_default ? 1 : 0;
  });
}

tsr_status* tsr_backend_get_details(size_t index, tsr_backend_details* out_details) {
  if (!out_details) return null_argument("out_details");
  if (out_details->struct_size < offsetof(tsr_backend_details, description) + sizeof(out_details->description)) {
    return make_status(TSR_INVALID_ARGUMENT, "tsr_backend_details.struct_size is too small");
  }
  return guarded([&] {
    const std::vector<const tessera::BackendEntry*> entries = tessera::all_backends();
    if (index >= entries.size()) tessera::throw_user_error("backend index ", index, " out of range (", entries.size(), " backends)");
    const tessera::BackendEntry& entry = *entries[index];
    // A built-in backend's version is asked of an instance, once per process.
    static std::mutex mutex;
    static std::map<std::string, std::string>* versions = new std::map<std::string, std::string>();
    const char* version = entry.plugin_version.c_str();
    if (entry.plugin_path.empty()) {
      std::lock_guard<std::mutex> lock(mutex);
      auto it = versions->find(entry.name);
      if (it == versions->end()) it = versions->emplace(entry.name, entry.make(tessera::RegionOptions{})->version()).first;
      version = it->second.c_str();
    }
    tsr_backend_details d{};
    d.struct_size = out_details->struct_size;
    d.name = entry.name.c_str();
    d.description = entry.description.c_str();
    d.version = version;
    d.used_by_default = entry.used_by_default ? 1 : 0;
    d.is_fallback = entry.is_fallback ? 1 : 0;
    d.plugin_path = entry.plugin_path.c_str();
    d.plugin_abi = entry.plugin_abi.c_str();
    std::memcpy(out_details, &d, std::min(out_details->struct_size, sizeof(d)));
  });
}

tsr_status* tsr_load_backend_plugin(const char* path, const char** out_name) {
  if (!path) return null_argument("path");
  return guarded([&] {
    const tessera::BackendEntry& entry = tessera::load_backend_plugin(path);
    if (out_name) *out_name = entry.name.c_str();
  });
}

tsr_status* tsr_model_load(const char* path, const tsr_options* options, tsr_model** out_model) {
  if (!path) return null_argument("path");
  if (!out_model) return null_argument("out_model");
  *out_model = nullptr;
  return guarded([&] {
    tsr_options defaults;
    const tsr_options& opts = options ? *options : defaults;
    check_model_file(path);
    std::unique_ptr<tessera::CompiledModel> compiled =
        tessera::is_artifact_file(path) ? tessera::CompiledModel::load(path, opts.compile)
                                        : compile_graph(tessera::onnx_frontend::import_onnx_file(path, opts.import), opts);
    *out_model = new tsr_model(std::move(compiled));
  });
}

tsr_status* tsr_model_load_from_memory(const void* data, size_t size, const char* name, const tsr_options* options,
                                       tsr_model** out_model) {
  if (!data && size) return null_argument("data");
  if (!out_model) return null_argument("out_model");
  *out_model = nullptr;
  return guarded([&] {
    tsr_options defaults;
    const tsr_options& opts = options ? *options : defaults;
    const std::string label = name ? name : "<memory>";
    std::unique_ptr<tessera::CompiledModel> compiled;
    if (tessera::is_artifact_bytes(data, size)) {
      // Constants and payloads point into the bytes: keep an aligned copy for the model's lifetime.
      auto copy = std::make_shared<tessera::Buffer>(size, false);
      if (size) std::memcpy(copy->data(), data, size);
      std::span<const uint8_t> bytes(static_cast<const uint8_t*>(copy->data()), size);
      compiled = tessera::CompiledModel::load_from_memory(bytes, copy, label, opts.compile);
    } else {
      const std::string bytes(static_cast<const char*>(data), size);
      compiled = compile_graph(tessera::onnx_frontend::import_onnx_bytes(bytes, "", opts.import), opts);
    }
    *out_model = new tsr_model(std::move(compiled));
  });
}

tsr_status* tsr_model_save_to_memory(const tsr_model* model, void** out_data, size_t* out_size) {
  if (!model) return null_argument("model");
  if (!out_data) return null_argument("out_data");
  if (!out_size) return null_argument("out_size");
  *out_data = nullptr;
  *out_size = 0;
  return guarded([&] {
    const std::vector<uint8_t> bytes = model->compiled->serialize();
    void* buffer = std::malloc(bytes.empty() ? 1 : bytes.size());
    if (!buffer) throw std::bad_alloc();
    if (!bytes.empty()) std::memcpy(buffer, bytes.data(), bytes.size());
    *out_data = buffer;
    *out_size = bytes.size();
  });
}

void tsr_buffer_free(void* data) { std::free(data); }

tsr_status* tsr_source_load(const char* path, const tsr_options* options, tsr_source** out_source) {
  if (!path) return null_argument("path");
  if (!out_source) return null_argument("out_source");
  *out_source = nullptr;
  return guarded([&] {
    tsr_options defaults;
    const tsr_options& opts = options ? *options : defaults;
    *out_source = make_source(import_model_file(path, opts, ", not an ONNX model: load it with tsr_model_load"));
  });
}

tsr_status* tsr_source_load_from_memory(const void* data, size_t size, const char* name, const tsr_options* options,
                                        tsr_source** out_source) {
  if (!data && size) return null_argument("data");
  if (!out_source) return null_argument("out_source");
  *out_source = nullptr;
  return guarded([&] {
    tsr_options defaults;
    const tsr_options& opts = options ? *options : defaults;
    if (tessera::is_artifact_bytes(data, size)) {
      tessera::throw_user_error("'", name ? name : "<memory>",
                                "' is a compiled artifact, not an ONNX model: load it with tsr_model_load_from_memory");
    }
    const std::string bytes(static_cast<const char*>(data), size);
    *out_source = make_source(tessera::onnx_frontend::import_onnx_bytes(bytes, "", opts.import));
  });
}

void tsr_source_free(tsr_source* source) { delete source; }

tsr_status* tsr_source_compile(const tsr_source* source, const tsr_options* options, tsr_model** out_model) {
  if (!source) return null_argument("source");
  if (!out_model) return null_argument("out_model");
  *out_model = nullptr;
  return guarded([&] {
    tsr_options defaults;
    *out_model = new tsr_model(compile_graph(source->graph, options ? *options : defaults));  // compiles a copy
  });
}

size_t tsr_source_input_count(const tsr_source* source) { return source ? source->inputs.size() : 0; }
size_t tsr_source_output_count(const tsr_source* source) { return source ? source->outputs.size() : 0; }

tsr_status* tsr_source_input_info(const tsr_source* source, size_t index, tsr_value_info* out_info) {
  if (!source) return null_argument("source");
  if (index >= source->inputs.size()) return make_status(TSR_INVALID_ARGUMENT, "input index out of range");
  const tessera::ValueDesc& desc = source->inputs[index];
  return fill_info(desc, source->dim_names.inputs[index], desc.kind == tessera::ValueKind::kTensor || desc.rank_known, out_info);
}

tsr_status* tsr_source_output_info(const tsr_source* source, size_t index, tsr_value_info* out_info) {
  if (!source) return null_argument("source");
  if (index >= source->outputs.size()) return make_status(TSR_INVALID_ARGUMENT, "output index out of range");
  return fill_info(source->outputs[index], source->dim_names.outputs[index], source->output_rank_known[index], out_info);
}

int32_t tsr_file_is_artifact(const char* path) {
  if (!path) return 0;
  struct stat info {};
  if (::stat(path, &info) != 0 || !S_ISREG(info.st_mode)) return 0;  // and never block on a FIFO
  try {
    return tessera::is_artifact_file(path) ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

tsr_status* tsr_model_save(const tsr_model* model, const char* path) {
  if (!model) return null_argument("model");
  if (!path) return null_argument("path");
  return guarded([&] { model->compiled->save(path); });
}

void tsr_model_free(tsr_model* model) { delete model; }

size_t tsr_model_input_count(const tsr_model* model) { return model ? model->compiled->inputs().size() : 0; }
size_t tsr_model_output_count(const tsr_model* model) { return model ? model->compiled->outputs().size() : 0; }

tsr_status* tsr_model_input_info(const tsr_model* model, size_t index, tsr_value_info* out_info) {
  if (!model) return null_argument("model");
  if (index >= model->compiled->inputs().size()) return make_status(TSR_INVALID_ARGUMENT, "input index out of range");
  const tessera::ValueDesc& desc = model->compiled->inputs()[index];
  return fill_info(desc, model->dim_names.inputs[index], desc.kind == tessera::ValueKind::kTensor || desc.rank_known, out_info);
}

tsr_status* tsr_model_output_info(const tsr_model* model, size_t index, tsr_value_info* out_info) {
  if (!model) return null_argument("model");
  if (index >= model->compiled->outputs().size()) return make_status(TSR_INVALID_ARGUMENT, "output index out of range");
  const tessera::ValueDesc& desc = model->compiled->outputs()[index];
  return fill_info(desc, model->dim_names.outputs[index], desc.kind == tessera::ValueKind::kTensor || desc.rank_known, out_info);
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

tsr_status* tsr_model_node_precision(const tsr_model* model, size_t index, const char** out_precision,
                                     const char** out_note) {
  if (!model) return null_argument("model");
  const auto& placement = model->compiled->placement();
  if (index >= placement.size()) return make_status(TSR_INVALID_ARGUMENT, "node index out of range");
  if (out_precision) *out_precision = placement[index].precision.c_str();
  if (out_note) *out_note = placement[index].precision_note.c_str();
  return nullptr;
}

const char* tsr_model_warnings(const tsr_model* model) {
  if (!model) return "";
  return model->warnings.c_str();
}

tsr_status* tsr_model_node_region(const tsr_model* model, size_t index, int64_t* out_region, const char** out_reason) {
  if (!model) return null_argument("model");
  const auto& placement = model->compiled->placement();
  if (index >= placement.size()) return make_status(TSR_INVALID_ARGUMENT, "node index out of range");
  if (out_region) *out_region = placement[index].region;
  if (out_reason) *out_reason = placement[index].why.c_str();
  return nullptr;
}

size_t tsr_model_region_count(const tsr_model* model) { return model ? model->compiled->regions().size() : 0; }

tsr_status* tsr_model_region_info(const tsr_model* model, size_t index, tsr_region_info* out_info) {
  if (!model) return null_argument("model");
  if (!out_info) return null_argument("out_info");
  if (out_info->struct_size < sizeof(tsr_region_info)) return make_status(TSR_INVALID_ARGUMENT, "out_info->struct_size is too small");
  const auto& regions = model->compiled->regions();
  if (index >= regions.size()) return make_status(TSR_INVALID_ARGUMENT, "region index out of range");
  const tessera::RegionSummary& r = regions[index];
  out_info->backend = r.backend.c_str();
  out_info->memory_space = r.memory_space.c_str();
  out_info->node_count = r.node_count;
  out_info->input_count = r.inputs.size();
  out_info->output_count = r.outputs.size();
  out_info->payload_bytes = r.payload_bytes;
  return nullptr;
}

tsr_status* tsr_model_copies_per_run(const tsr_model* model, int64_t* out_copies, int64_t* out_bytes) {
  if (!model) return null_argument("model");
  if (out_copies) *out_copies = model->compiled->copies_per_run();
  if (out_bytes) *out_bytes = model->compiled->copy_bytes_per_run();
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
    for (size_t i = 0; i < num_outputs; ++i) out_views.push_back(view_of(outputs[i], descs[i], "output '" + descs[i].name + "'"));
    check_no_overlap(in, out_views, model);
    std::vector<tessera::TensorView*> out_ptrs;
    for (auto& v : out_views) out_ptrs.push_back(&v);
    model->compiled->run(in, out_ptrs);
  });
}

tsr_status* tsr_model_run_alloc(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                DLManagedTensor** out_outputs, size_t num_outputs) {
  return run_alloc(model, inputs, num_inputs, out_outputs, num_outputs, nullptr);
}

tsr_status* tsr_model_run_profiled(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                   DLManagedTensor** out_outputs, size_t num_outputs, double* out_node_milliseconds,
                                   size_t num_nodes) {
  if (!out_node_milliseconds) return null_argument("out_node_milliseconds");
  tsr_run_profile profile{};
  profile.struct_size = sizeof(profile);
  profile.node_milliseconds = out_node_milliseconds;
  profile.num_nodes = num_nodes;
  return run_alloc(model, inputs, num_inputs, out_outputs, num_outputs, &profile);
}

tsr_status* tsr_model_run_with_profile(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                       DLManagedTensor** out_outputs, size_t num_outputs, tsr_run_profile* profile) {
  if (!profile) return null_argument("profile");
  return run_alloc(model, inputs, num_inputs, out_outputs, num_outputs, profile);
}

tsr_status* tsr_model_check(const tsr_model* model, const DLTensor* inputs, size_t num_inputs, double tolerance,
                            double min_cosine, int32_t float64_reference, const char* model_name, char** out_table,
                            char** out_json, char** out_html, size_t* out_flagged) {
  if (!model) return null_argument("model");
  if (out_table) *out_table = nullptr;
  if (out_json) *out_json = nullptr;
  if (out_html) *out_html = nullptr;
  if (out_flagged) *out_flagged = 0;
  return guarded([&] {
    if (std::isnan(tolerance) || std::isnan(min_cosine) || min_cosine > 1) {
      tessera::throw_user_error("check: tolerance must be a number and min_cosine at most 1");
    }
    std::vector<tessera::TensorView> in = input_views(model, inputs, num_inputs);
    tessera::CheckOptions options;
    options.tolerance = tolerance;
    options.min_cosine = min_cosine;
    options.float64_reference = float64_reference != 0;
    const tessera::CheckReport report = model->compiled->check(in, options, model_name ? model_name : "");
    // All made before any is handed out: on a failure the caller owns nothing.
    auto rendered = [&](char** wanted, std::string (*render)(const tessera::CheckReport&)) {
      return wanted ? malloc_string(render(report)) : MallocString(nullptr, std::free);
    };
    MallocString table = rendered(out_table, tessera::render_check_table);
    MallocString json = rendered(out_json, tessera::render_check_json);
    MallocString html = rendered(out_html, tessera::render_check_html);
    if (out_table) *out_table = table.release();
    if (out_json) *out_json = json.release();
    if (out_html) *out_html = html.release();
    if (out_flagged) *out_flagged = report.regions_over_tolerance;
  });
}

tsr_status* tsr_model_report(const tsr_model* model, const char* format, const char* model_name,
                             const tsr_run_profile* profile, char** out_text) {
  if (!model) return null_argument("model");
  if (!format) return null_argument("format");
  if (!out_text) return null_argument("out_text");
  *out_text = nullptr;
  return guarded([&] {
    tessera::RunProfile measured;
    if (profile) {
      check_profile(*profile, model);  // a short array would have been read past its end
      if (profile->node_milliseconds) measured.node_milliseconds.assign(profile->node_milliseconds, profile->node_milliseconds + profile->num_nodes);
      if (profile->region_milliseconds) {
        measured.region_milliseconds.assign(profile->region_milliseconds, profile->region_milliseconds + profile->num_regions);
      }
    }
    tessera::PlacementReport report = model->compiled->placement_report(model_name ? model_name : "", profile ? &measured : nullptr);
    const std::string f = format;
    std::string text;
    if (f == "table") text = tessera::render_report_table(report);
    else if (f == "json") text = tessera::render_report_json(report);
    else if (f == "dot") text = tessera::render_report_dot(report);
    else if (f == "html") text = tessera::render_report_html(report);
    else tessera::throw_user_error("unknown report format '", f, "' (table, json, dot, html)");
    *out_text = malloc_string(text).release();
  });
}

void tsr_string_free(char* text) { std::free(text); }


tsr_status* tsr_quantizer_create(const char* model_path, const tsr_options* options, const tsr_quantize_config* config,
                                 tsr_quantizer** out_quantizer) {
  if (!model_path) return null_argument("model_path");
  if (!out_quantizer) return null_argument("out_quantizer");
  *out_quantizer = nullptr;
  return guarded([&] {
    tsr_options defaults;
    const tsr_options& opts = options ? *options : defaults;
    tessera::quantize::QuantizeOptions q;
    if (config) {
      // Members past the caller's struct_size keep their defaults.
      auto has = [&](size_t end) { return config->struct_size >= end; };
#define TSR_QCONFIG_HAS(member) has(offsetof(tsr_quantize_config, member) + sizeof(config->member))
      if (config->struct_size < sizeof(size_t)) tessera::throw_user_error("tsr_quantize_config: struct_size is not set");
      if (TSR_QCONFIG_HAS(method) && config->method) q.method = tessera::quantize::parse_calibration_method(config->method);
      if (TSR_QCONFIG_HAS(percentile) && config->percentile != 0) q.percentile = config->percentile;
      if (TSR_QCONFIG_HAS(per_channel)) q.per_channel = config->per_channel != 0;
      if (TSR_QCONFIG_HAS(exclude) && config->exclude) {
        std::string list = config->exclude;
        size_t start = 0;
        while (start <= list.size()) {
          size_t comma = list.find(',', start);
          if (comma == std::string::npos) comma = list.size();
          std::string item = list.substr(start, comma - start);
          if (!item.empty()) q.exclude.push_back(item);
          start = comma + 1;
        }
      }
      if (TSR_QCONFIG_HAS(random_samples)) {
        if (config->random_samples < 0) tessera::throw_user_error("tsr_quantize_config: random_samples is negative");
        if (config->random_samples > 0) q.random_samples = config->random_samples;
      }
      if (TSR_QCONFIG_HAS(seed)) q.seed = config->seed;
      if (TSR_QCONFIG_HAS(progress_user) && config->progress) {
        tsr_progress_fn fn = config->progress;
        void* user = config->progress_user;
        tsr_stop_fn stop = TSR_QCONFIG_HAS(stop) ? config->stop : nullptr;
        q.progress = [fn, user, stop](const std::string& phase, int64_t done, int64_t total) {
          fn(user, phase.c_str(), done, total);
          if (stop && stop(user)) tessera::throw_user_error("quantize: stopped by the caller (", phase, " ", done, " of ", total, ")");
        };
      }
#undef TSR_QCONFIG_HAS
    }
    tessera::Graph graph = import_model_file(model_path, opts, ": quantize the ONNX model it came from");
    auto made = std::make_unique<tsr_quantizer>();
    std::unique_ptr<tsr_source> source(make_source(graph));
    made->inputs = source->inputs;
    tessera::CompileOptions compile = opts.compile;
    for (const auto& [name, shape] : opts.data_shapes) compile.input_shapes[name] = shape;
    made->quantizer = std::make_unique<tessera::quantize::Quantizer>(model_path, std::move(graph), compile, q);
    *out_quantizer = made.release();
  });
}

tsr_status* tsr_quantizer_add_sample(tsr_quantizer* quantizer, const DLTensor* inputs, size_t num_inputs) {
  if (!quantizer) return null_argument("quantizer");
  if (!inputs && num_inputs) return null_argument("inputs");
  return guarded([&] {
    if (num_inputs != quantizer->inputs.size()) {
      tessera::throw_user_error("a calibration sample needs ", quantizer->inputs.size(), " tensors (one per model input), got ",
                                num_inputs);
    }
    std::vector<tessera::TensorView> views;
    for (size_t i = 0; i < num_inputs; ++i) {
      // Open dims take the sample's size; the others must match.
      tessera::ValueDesc desc = quantizer->inputs[i];
      const std::string what = str_cat("calibration input '", desc.name, "'");
      if (inputs[i].ndim == static_cast<int32_t>(desc.shape.size()) && inputs[i].shape) {
        for (size_t d = 0; d < desc.shape.size(); ++d) {
          if (desc.shape[d] < 0) desc.shape[d] = inputs[i].shape[d];
        }
      }
      views.push_back(view_of(inputs[i], desc, what));
    }
    quantizer->quantizer->add_sample(views);
  });
}

tsr_status* tsr_quantizer_write(tsr_quantizer* quantizer, const char* output_path, char** out_summary) {
  if (!quantizer) return null_argument("quantizer");
  if (!output_path) return null_argument("output_path");
  if (out_summary) *out_summary = nullptr;
  return guarded([&] {
    MallocString summary = malloc_string(quantizer->quantizer->write(output_path));
    if (out_summary) *out_summary = summary.release();
  });
}

void tsr_quantizer_free(tsr_quantizer* quantizer) { delete quantizer; }

tsr_status* tsr_tune(const char* model_path, const tsr_options* options, const tsr_tune_config* config, const char* record_path,
                     char** out_summary) {
  if (!model_path) return null_argument("model_path");
  if (!record_path) return null_argument("record_path");
  if (out_summary) *out_summary = nullptr;
  return guarded([&] {
    tsr_options defaults;
    const tsr_options& opts = options ? *options : defaults;
    tessera::TuneOptions tune;
    if (config) {
      auto has = [&](size_t end) { return config->struct_size >= end; };
#define TSR_TCONFIG_HAS(member) has(offsetof(tsr_tune_config, member) + sizeof(config->member))
      if (config->struct_size < sizeof(size_t)) tessera::throw_user_error("tsr_tune_config: struct_size is not set");
      if (TSR_TCONFIG_HAS(budget_seconds) && config->budget_seconds != 0) {
        if (!(config->budget_seconds > 0) || config->budget_seconds > 1e6) {
          tessera::throw_user_error("tsr_tune_config: budget_seconds must be positive, is ", config->budget_seconds);
        }
        tune.budget_seconds = config->budget_seconds;
      }
      if (TSR_TCONFIG_HAS(progress_user) && config->progress) {
        tsr_progress_fn fn = config->progress;
        void* user = config->progress_user;
        tsr_stop_fn stop = TSR_TCONFIG_HAS(stop) ? config->stop : nullptr;
        tune.progress = [fn, user, stop](const std::string& phase, int64_t done, int64_t total) {
          fn(user, phase.c_str(), done, total);
          if (stop && stop(user)) tessera::throw_user_error("tune: stopped by the caller (", phase, " ", done, " of ", total, ")");
        };
      }
#undef TSR_TCONFIG_HAS
    }
    if (opts.compile.tuning) tessera::throw_user_error("tune: the options already carry a tuning record");
    const tessera::Graph graph = import_model_file(model_path, opts, ": tune the ONNX model it came from");
    tune.base = compile_options_for(graph, opts);
    const tessera::TuningRecord record = tessera::tune_placement(graph, tune);
    const std::string text = tessera::write_tuning_record(record);
    tessera::safe_file::replace_file(record_path, [&](const tessera::safe_file::Sink& sink) { sink(text.data(), text.size()); });
    MallocString summary = malloc_string(tessera::tuning_summary(record));
    if (out_summary) *out_summary = summary.release();
  });
}

tsr_status* tsr_options_set_tuning(tsr_options* options, const char* record_path) {
  if (!options) return null_argument("options");
  if (!record_path) return null_argument("record_path");
  return guarded([&] {
    options->compile.tuning = std::make_shared<const tessera::TuningRecord>(tessera::read_tuning_record_file(record_path));
  });
}

}  // extern "C"
