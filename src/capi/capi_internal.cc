// The C API's shared helpers (capi_internal.h).
#include "capi/capi_internal.h"

namespace tessera::capi {

tsr_status* make_status(tsr_status_code code, std::string message) {
  return new (std::nothrow) tsr_status{code, std::move(message)};
}

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
tessera::TensorView view_of(const DLTensor& t, const tessera::ValueDesc& desc, const std::string& what,
                            bool open_dims_free, bool strided_ok) {
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
  bool fits = view.dtype == desc.dtype;
  for (size_t i = 0; i < desc.shape.size(); ++i) {
    if (desc.shape[i] >= 0) {
      fits &= view.shape[i] == desc.shape[i];
    } else if (!open_dims_free) {
      tessera::throw_user_error(what, ": its shape (", tessera::shape_to_string(desc.shape),
                                ") is only known after running; use tsr_model_run_alloc");
    }
  }
  if (!fits) {
    tessera::throw_user_error(what, ": expected ", expected, ", got ", tessera::dtype_name(view.dtype), "[",
                              tessera::shape_to_string(view.shape), "]");
  }
  if (t.strides) {  // compact row-major strides are accepted; padded ones where strided_ok
    int64_t stride = 1;
    bool contiguous = true;
    for (int32_t i = t.ndim; i-- > 0;) {
      contiguous &= view.shape[static_cast<size_t>(i)] == 1 || t.strides[i] == stride;
      stride *= view.shape[static_cast<size_t>(i)];
    }
    if (!contiguous) {
      std::vector<int64_t> strides(t.strides, t.strides + t.ndim);
      if (!strided_ok) tessera::throw_user_error(what, ": only contiguous row-major tensors are supported");
      for (int64_t stride : strides) {
        if (stride < 0) tessera::throw_user_error(what, ": negative strides are not supported");
      }
      view.strides = std::move(strides);  // the run checks what it needs of them (runtime/session_binding.cc)
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
  // The bytes a view spans, first to last element (a strided one's gaps included).
  auto span = [](const tessera::TensorView& v) {
    const std::vector<int64_t> strides = tessera::view_strides(v);
    int64_t last = 0;
    for (size_t d = 0; d < v.shape.size(); ++d) last += (v.shape[d] - 1) * strides[d];
    return static_cast<uintptr_t>(last + 1) * tessera::dtype_size(v.dtype);
  };
  auto overlap = [&](const tessera::TensorView& a, const tessera::TensorView& b) {
    if (!a.data || !b.data || a.nbytes() == 0 || b.nbytes() == 0) return false;
    const auto a_begin = reinterpret_cast<uintptr_t>(a.data), b_begin = reinterpret_cast<uintptr_t>(b.data);
    return a_begin < b_begin + span(b) && b_begin < a_begin + span(a);
  };
  // A cache's output growing its input's box: same memory, same strides, longer along the axis only.
  auto grows = [&](size_t output, size_t input) {
    for (const tessera::CachePair& pair : model->compiled->cache_pairs()) {
      if (pair.input != input || pair.output != output) continue;
      const tessera::TensorView& a = inputs[input];
      const tessera::TensorView& b = outputs[output];
      if (a.data != b.data || a.dtype != b.dtype || a.shape.size() != b.shape.size()) return false;
      const std::vector<int64_t> sa = tessera::view_strides(a);
      const std::vector<int64_t> sb = tessera::view_strides(b);
      for (size_t d = 0; d < a.shape.size(); ++d) {
        const bool along = static_cast<int64_t>(d) == pair.axis;
        if (along ? a.shape[d] > b.shape[d] : a.shape[d] != b.shape[d]) return false;
        if (a.shape[d] > 1 && sa[d] != sb[d]) return false;
      }
      return true;
    }
    return false;
  };
  const auto& in = model->compiled->inputs();
  const auto& out = model->compiled->outputs();
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (overlap(outputs[i], inputs[j]) && !grows(i, j)) {
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
                      tsr_value_info* out, const void* fixed_value) {
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
  if (out->struct_size >= offsetof(tsr_value_info, fixed_value) + sizeof(const void*)) out->fixed_value = fixed_value;
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

std::vector<tessera::TensorView> input_views(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                             bool strided_ok) {
  if (num_inputs && !inputs) tessera::throw_user_error("inputs is NULL");
  if (!model->tensor_run_refusal.empty()) tessera::throw_unsupported(model->tensor_run_refusal);
  const auto& descs = model->compiled->inputs();
  if (num_inputs != descs.size()) {
    tessera::throw_user_error("the model has ", descs.size(), " inputs but ", num_inputs, " were given");
  }
  std::vector<tessera::TensorView> views;
  for (size_t i = 0; i < num_inputs; ++i) views.push_back(view_of(inputs[i], descs[i], "input '" + descs[i].name + "'", true, strided_ok));
  return views;
}

void add_profile_tail(tsr_run_profile& profile, const tessera::RunProfile& measured, const tsr_model* model) {
  if (profile.struct_size >= offsetof(tsr_run_profile, shape_cache_hits) && profile.region_fallbacks) {
    for (size_t i = 0; i < measured.region_fallbacks.size(); ++i) profile.region_fallbacks[i] += measured.region_fallbacks[i];
  }
  auto has = [&](size_t end) { return profile.struct_size >= end; };
#define TSR_PROFILE_HAS(member) has(offsetof(tsr_run_profile, member) + sizeof(profile.member))
  if (TSR_PROFILE_HAS(allocations)) profile.allocations += measured.counts.allocations;
  if (TSR_PROFILE_HAS(binding_copy_bytes)) {
    profile.binding_copies += measured.counts.binding_copies;
    profile.binding_copy_bytes += measured.counts.binding_copy_bytes;
  }
  if (TSR_PROFILE_HAS(shape_deferrals)) profile.shape_deferrals += measured.counts.shape_deferrals;
  if (TSR_PROFILE_HAS(num_inner_nodes) && profile.inner_node_milliseconds) {
    // Flattened in row order, as tsr_model_inner_node lists them (check_profile checked the count).
    size_t k = 0;
    for (size_t row = 0; row < model->compiled->placement().size(); ++row) {
      const size_t count = model->compiled->inner_placement(row).size();
      const bool ran = row < measured.inner_node_milliseconds.size();
      for (size_t j = 0; j < count && k < profile.num_inner_nodes; ++j, ++k) {
        if (ran && j < measured.inner_node_milliseconds[row].size()) profile.inner_node_milliseconds[k] += measured.inner_node_milliseconds[row][j];
      }
    }
  }
#undef TSR_PROFILE_HAS
  if (profile.struct_size >= offsetof(tsr_run_profile, allocations)) {
    profile.shape_cache_hits += measured.counts.shape_cache_hits;
    profile.shape_cache_misses += measured.counts.shape_cache_misses;
    profile.shape_prepare_milliseconds += measured.counts.shape_prepare_milliseconds;
    profile.shape_fallbacks += measured.counts.shape_fallbacks;
  }
}

/// A caller's tsr_run_profile: big enough, with arrays (where given) of the model's node and region counts.
void check_profile(const tsr_run_profile& profile, const tsr_model* model) {
  // region_fallbacks was appended: a profile without it is still whole.
  if (profile.struct_size < offsetof(tsr_run_profile, region_fallbacks)) tessera::throw_user_error("profile->struct_size is too small");
  if (profile.node_milliseconds && profile.num_nodes != model->compiled->placement().size()) {
    tessera::throw_user_error("the model has ", model->compiled->placement().size(), " nodes but room for ",
                              profile.num_nodes, " times was given");
  }
  const bool inner = profile.struct_size >= offsetof(tsr_run_profile, num_inner_nodes) + sizeof(size_t) &&
                     profile.inner_node_milliseconds;
  if (inner && profile.num_inner_nodes != tsr_model_inner_node_count(model)) {
    tessera::throw_user_error("the model has ", tsr_model_inner_node_count(model), " nodes inside control-flow bodies but room for ",
                              profile.num_inner_nodes, " times was given");
  }
  const bool fallbacks = profile.struct_size >= offsetof(tsr_run_profile, shape_cache_hits) && profile.region_fallbacks;
  if ((profile.region_milliseconds || fallbacks) && profile.num_regions != model->compiled->regions().size()) {
    tessera::throw_user_error("the model has ", model->compiled->regions().size(), " regions but room for ",
                              profile.num_regions, " times was given");
  }
}

tsr_status* run_alloc(const tsr_model* model, const DLTensor* inputs, size_t num_inputs, DLManagedTensor** out_outputs,
                      size_t num_outputs, tsr_run_profile* profile) {
  if (!model) return null_argument("model");
  if (!out_outputs) return null_argument("out_outputs");
  for (size_t i = 0; i < num_outputs; ++i) out_outputs[i] = nullptr;
  return guarded([&] {
    std::vector<tessera::TensorView> in = input_views(model, inputs, num_inputs, true);
    if (num_outputs != model->compiled->outputs().size()) {
      tessera::throw_user_error("the model has ", model->compiled->outputs().size(), " outputs but room for ",
                                num_outputs, " was given");
    }
    tessera::RunProfile measured;
    if (profile) check_profile(*profile, model);
    // Without an array for them, nodes are not timed: the backends run as they do unprofiled.
    measured.time_nodes = profile && profile->node_milliseconds && profile->num_nodes > 0;
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
      add_profile_tail(*profile, measured, model);
    }
    // Built in full before any is handed out: on a failure the caller owns nothing.
    std::vector<std::unique_ptr<ManagedOutput>> holders;
    for (size_t i = 0; i < results.size(); ++i) holders.push_back(managed_holder(results[i]));
    for (size_t i = 0; i < holders.size(); ++i) out_outputs[i] = &holders[i].release()->managed;
  });
}

std::unique_ptr<ManagedOutput> managed_holder(tessera::Tensor tensor) {
  auto holder = std::make_unique<ManagedOutput>();
  holder->tensor = std::move(tensor);
  holder->shape = holder->tensor.shape();
  DLTensor& t = holder->managed.dl_tensor;
  t.data = holder->tensor.data();
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(holder->shape.size());
  t.dtype = to_dl(holder->tensor.dtype());
  t.shape = holder->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  holder->managed.manager_ctx = holder.get();
  holder->managed.deleter = delete_managed;
  return holder;
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

}  // namespace tessera::capi
