// The C API: Loading, saving and describing models and sources: inputs, outputs, placement, regions, metadata. Nothing here throws (guarded).
#include "capi/capi_internal.h"

using namespace tessera::capi;  // NOLINT: the shared helpers

extern "C" {

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
  return fill_info(desc, source->dim_names.inputs[index], desc.rank_known, out_info);
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
  const tessera::Tensor* fixed = model->compiled->fixed_input_value(index);
  return fill_info(desc, model->dim_names.inputs[index], desc.rank_known, out_info, fixed ? fixed->data() : nullptr);
}

tsr_status* tsr_model_output_info(const tsr_model* model, size_t index, tsr_value_info* out_info) {
  if (!model) return null_argument("model");
  if (index >= model->compiled->outputs().size()) return make_status(TSR_INVALID_ARGUMENT, "output index out of range");
  const tessera::ValueDesc& desc = model->compiled->outputs()[index];
  return fill_info(desc, model->dim_names.outputs[index], desc.rank_known, out_info);
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

size_t tsr_model_inner_node_count(const tsr_model* model) {
  if (!model) return 0;
  size_t count = 0;
  for (size_t row = 0; row < model->compiled->placement().size(); ++row) count += model->compiled->inner_placement(row).size();
  return count;
}

tsr_status* tsr_model_inner_node(const tsr_model* model, size_t index, size_t* out_row, const char** out_path,
                                 const char** out_op_type, const char** out_backend) {
  if (!model) return null_argument("model");
  for (size_t row = 0; row < model->compiled->placement().size(); ++row) {
    const std::vector<tessera::InnerNodePlacement>& inner = model->compiled->inner_placement(row);
    if (index >= inner.size()) {
      index -= inner.size();
      continue;
    }
    if (out_row) *out_row = row;
    if (out_path) *out_path = inner[index].path.c_str();
    if (out_op_type) *out_op_type = inner[index].op_type.c_str();
    if (out_backend) *out_backend = inner[index].backend.c_str();
    return nullptr;
  }
  return make_status(TSR_INVALID_ARGUMENT, "inner node index out of range");
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

tsr_status* tsr_model_stats(const tsr_model* model, tsr_model_stats_t* out_stats) {
  if (!model) return null_argument("model");
  if (!out_stats) return null_argument("out_stats");
  return guarded([&] {
    // Members were appended: a caller built before them gets those it has.
    const size_t size = out_stats->struct_size;
    if (size < offsetof(tsr_model_stats_t, binding_copies)) tessera::throw_user_error("out_stats->struct_size is too small");
    const tessera::ModelStats s = model->compiled->stats();
    out_stats->runs = s.runs;
    out_stats->shape_cache_hits = s.counts.shape_cache_hits;
    out_stats->shape_cache_misses = s.counts.shape_cache_misses;
    out_stats->shape_prepare_milliseconds = s.counts.shape_prepare_milliseconds;
    out_stats->shape_fallbacks = s.counts.shape_fallbacks;
    out_stats->allocations = s.counts.allocations;
    if (size >= offsetof(tsr_model_stats_t, binding_copy_bytes) + sizeof(int64_t)) {
      out_stats->binding_copies = s.counts.binding_copies;
      out_stats->binding_copy_bytes = s.counts.binding_copy_bytes;
    }
    if (size >= offsetof(tsr_model_stats_t, shape_deferrals) + sizeof(int64_t)) {
      out_stats->shape_deferrals = s.counts.shape_deferrals;
    }
  });
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

}  // extern "C"
