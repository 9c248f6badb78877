// The C API: tessera quantize and tessera tune through the C API, and applying a tuning record. Nothing here throws (guarded).
#include "capi/capi_internal.h"

using namespace tessera::capi;  // NOLINT: the shared helpers

extern "C" {

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
      if (TSR_QCONFIG_HAS(weights_only)) q.weights_only = config->weights_only != 0;
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
      const tessera::ValueDesc& desc = quantizer->inputs[i];
      views.push_back(view_of(inputs[i], desc, str_cat("calibration input '", desc.name, "'"), true));
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

}  // extern "C"
