// tessera._tessera: Model (a compiled model: run, profile, report, check,
// save), Source (an ONNX model read but not compiled) and the quantize and
// tune functions (see binding.h).
#include "binding.h"

namespace tessera_py {

// ------------------------------------------------------------------ model --

using ModelPtr = std::shared_ptr<tsr_model>;

/// A loaded model. close() drops this handle's reference; runs in flight
/// hold their own, so the model is freed when the last of them returns.
class Model {
 public:
  explicit Model(tsr_model* model) : model_(model, tsr_model_free), values_reason_(values_reason(model)) {}

  static Model load_path(const std::string& path, const Options* options) {
    tsr_model* model = nullptr;
    const char* file = c_text(path);
    check_without_gil([&] { return tsr_model_load(file, native(options), &model); });
    return Model(model);
  }
  static Model load_bytes(const py::bytes& bytes, const std::string& name, const Options* options) {
    const std::string_view data = bytes;  // bytes are immutable: safe to read without the GIL
    tsr_model* model = nullptr;
    const char* label = c_text(name);
    check_without_gil([&] { return tsr_model_load_from_memory(data.data(), data.size(), label, native(options), &model); });
    return Model(model);
  }

  ModelPtr get() const {
    ModelPtr model = model_;
    if (!model) invalid("the session is closed");
    return model;
  }
  void close() { model_.reset(); }
  bool closed() const { return !model_; }

  py::list inputs() const { return value_infos(get().get(), tsr_model_input_count, tsr_model_input_info); }
  py::list outputs() const { return value_infos(get().get(), tsr_model_output_count, tsr_model_output_info); }

  void save(const std::string& path) const {
    ModelPtr model = get();
    const char* file = c_text(path);
    check_without_gil([&] { return tsr_model_save(model.get(), file); });
  }
  py::bytes to_bytes() const {
    ModelPtr model = get();
    void* data = nullptr;
    size_t size = 0;
    check(tsr_model_save_to_memory(model.get(), &data, &size));
    py::bytes result(static_cast<const char*>(data), size);
    tsr_buffer_free(data);
    return result;
  }

  py::list placement() const {
    ModelPtr model = get();
    py::list nodes;
    for (size_t i = 0; i < tsr_model_node_count(model.get()); ++i) {
      const char *name = nullptr, *op = nullptr, *backend = nullptr, *note = nullptr, *reason = nullptr;
      int64_t region = -1;
      check(tsr_model_node_placement(model.get(), i, &name, &op, &backend));
      check(tsr_model_node_note(model.get(), i, &note));
      check(tsr_model_node_region(model.get(), i, &region, &reason));
      py::dict node;
      node["node"] = name;
      node["op_type"] = op;
      node["backend"] = backend;
      node["region"] = region;
      node["reason"] = reason;
      node["note"] = note;
      const char *precision = nullptr, *precision_note = nullptr;
      check(tsr_model_node_precision(model.get(), i, &precision, &precision_note));
      node["precision"] = precision;
      node["precision_note"] = precision_note;
      nodes.append(node);
    }
    return nodes;
  }
  py::list regions() const {
    ModelPtr model = get();
    py::list regions;
    for (size_t i = 0; i < tsr_model_region_count(model.get()); ++i) {
      tsr_region_info info{};
      info.struct_size = sizeof(info);
      check(tsr_model_region_info(model.get(), i, &info));
      py::dict r;
      r["backend"] = info.backend;
      r["memory_space"] = info.memory_space;
      r["nodes"] = info.node_count;
      r["inputs"] = info.input_count;
      r["outputs"] = info.output_count;
      r["payload_bytes"] = info.payload_bytes;
      regions.append(r);
    }
    return regions;
  }
  py::dict stats() const {
    ModelPtr model = get();
    tsr_model_stats_t stats{};
    stats.struct_size = sizeof(stats);
    check(tsr_model_stats(model.get(), &stats));
    py::dict s;
    s["runs"] = stats.runs;
    s["shape_cache_hits"] = stats.shape_cache_hits;
    s["shape_cache_misses"] = stats.shape_cache_misses;
    s["shape_prepare_ms"] = stats.shape_prepare_milliseconds;
    s["shape_fallbacks"] = stats.shape_fallbacks;
    s["shape_deferrals"] = stats.shape_deferrals;
    s["allocations"] = stats.allocations;
    s["binding_copies"] = stats.binding_copies;
    s["binding_copy_bytes"] = stats.binding_copy_bytes;
    return s;
  }
  py::dict summary() const {
    ModelPtr model = get();
    py::dict s;
    int64_t copies = 0, bytes = 0;
    check(tsr_model_copies_per_run(model.get(), &copies, &bytes));
    s["arena_bytes"] = tsr_model_arena_bytes(model.get());
    s["constant_bytes"] = tsr_model_constant_bytes(model.get());
    s["parameter_count"] = tsr_model_parameter_count(model.get());
    s["copies_per_run"] = copies;
    s["copy_bytes_per_run"] = bytes;
    py::dict metadata;
    for (size_t i = 0; i < tsr_model_metadata_count(model.get()); ++i) {
      const char *key = nullptr, *value = nullptr;
      check(tsr_model_metadata(model.get(), i, &key, &value));
      metadata[key] = value;
    }
    s["metadata"] = metadata;
    return s;
  }

  /// Runs on `inputs` (one object per model input, in model order).
  /// Returns numpy arrays, or Tensor objects when as_dlpack.
  py::list run(const py::sequence& inputs, bool as_dlpack) const {
    ModelPtr model = get();
    if (!values_reason_.empty()) return run_values(model, inputs, as_dlpack);
    std::vector<SharedOutput> outputs = run_raw(model, inputs, nullptr);
    return wrap_outputs(model, outputs, as_dlpack);
  }

  /// I/O binding: runs on `inputs` (strided arrays read in place where the model can) with `outputs`, one
  /// per model output, None (allocated by the run, returned) or a writeable buffer (numpy array, or anything
  /// with __dlpack__) the run writes (in place where the model can). Returns a list: the buffer given, or
  /// what the run allocated (numpy arrays, or Tensor objects when as_dlpack).
  py::list run_bound(const py::sequence& inputs, const py::sequence& outputs, bool as_dlpack) const {
    ModelPtr model = get();
    refuse_values("run_with_iobinding");
    const size_t num_outputs = tsr_model_output_count(model.get());
    if (outputs.size() != num_outputs) {
      invalid("the model has " + std::to_string(num_outputs) + " outputs but " + std::to_string(outputs.size()) +
              " were given");
    }
    RunInputs held(true);
    hold_inputs(model, inputs, held);
    OutputBuffers buffers;
    std::vector<const DLTensor*> out(num_outputs, nullptr);
    for (size_t i = 0; i < num_outputs; ++i) {
      if (outputs[i].is_none()) continue;
      tsr_value_info info{};
      info.struct_size = sizeof(info);
      check(tsr_model_output_info(model.get(), i, &info));
      out[i] = buffers.add(outputs[i], std::string("output '") + info.name + "'");
    }
    std::vector<DLManagedTensor*> raw(num_outputs, nullptr);
    const std::vector<DLTensor>& in = held.tensors();
    check_without_gil([&] {
      return tsr_model_run_bound(model.get(), in.data(), in.size(), out.data(), raw.data(), raw.size());
    });
    py::list result;
    for (size_t i = 0; i < num_outputs; ++i) {
      if (out[i]) {
        result.append(outputs[i]);
        continue;
      }
      std::vector<SharedOutput> one{share(raw[i])};
      raw[i] = nullptr;
      tsr_value_info info{};
      info.struct_size = sizeof(info);
      check(tsr_model_output_info(model.get(), i, &info));
      result.append(as_dlpack ? py::object(py::cast(Tensor(one[0]))) : py::object(numpy_view(one[0], info.name)));
    }
    return result;
  }

  /// Runs `runs` times and returns (outputs of the last run, per-node ms,
  /// per-region ms, per-region fallbacks, copies, copy bytes), all summed over the runs.
  py::tuple profile(const py::sequence& inputs, int runs, bool as_dlpack) const {
    if (runs < 1) invalid("runs must be at least 1");
    ModelPtr model = get();
    refuse_values("profile");
    std::vector<double> nodes(tsr_model_node_count(model.get()), 0.0), regions(tsr_model_region_count(model.get()), 0.0);
    std::vector<int64_t> fallbacks(regions.size(), 0);
    tsr_run_profile profile{};
    profile.struct_size = sizeof(profile);
    profile.node_milliseconds = nodes.data();
    profile.num_nodes = nodes.size();
    profile.region_milliseconds = regions.data();
    profile.num_regions = regions.size();
    profile.region_fallbacks = fallbacks.data();
    std::vector<double> inner(tsr_model_inner_node_count(model.get()), 0.0);
    profile.inner_node_milliseconds = inner.empty() ? nullptr : inner.data();
    profile.num_inner_nodes = inner.size();
    std::vector<SharedOutput> outputs;
    for (int r = 0; r < runs; ++r) outputs = run_raw(model, inputs, &profile);
    // The nodes inside compiled control-flow bodies: (holder node index, path, op type, backend, ms).
    py::list inner_rows;
    for (size_t k = 0; k < inner.size(); ++k) {
      size_t row = 0;
      const char *path = nullptr, *op = nullptr, *backend = nullptr;
      check(tsr_model_inner_node(model.get(), k, &row, &path, &op, &backend));
      inner_rows.append(py::make_tuple(row, path, op, backend, inner[k]));
    }
    return py::make_tuple(wrap_outputs(model, outputs, as_dlpack), nodes, regions, fallbacks, profile.copies,
                          profile.copy_bytes, inner_rows);
  }

  /// The accuracy check (tsr_model_check): (table text, JSON text, HTML page, regions over tolerance).
  py::tuple check_accuracy(const py::sequence& inputs, double tolerance, double min_cosine, bool float64_reference,
                           const std::string& name) const {
    ModelPtr model = get();
    refuse_values("check");
    RunInputs held;
    hold_inputs(model, inputs, held);
    const std::vector<DLTensor>& in = held.tensors();
    char* table = nullptr;
    char* json = nullptr;
    char* html = nullptr;
    size_t flagged = 0;
    tsr_check_config config{};
    config.struct_size = sizeof(config);
    config.tolerance = tolerance;
    config.min_cosine = min_cosine;
    config.float64_reference = float64_reference ? 1 : 0;
    config.model_name = c_text(name);  // with the GIL held: a NUL byte raises
    check_without_gil([&] { return tsr_model_check(model.get(), in.data(), in.size(), &config, &table, &json, &html, &flagged); });
    const std::string table_text = table, json_text = json, html_text = html;
    tsr_string_free(table);
    tsr_string_free(json);
    tsr_string_free(html);
    return py::make_tuple(table_text, json_text, html_text, flagged);
  }

  std::string report(const std::string& format, const std::string& name) const {
    ModelPtr model = get();
    char* text = nullptr;
    check(tsr_model_report(model.get(), c_text(format), c_text(name), nullptr, &text));
    std::string result = text;
    tsr_string_free(text);
    return result;
  }

 private:
  /// Profiles and accuracy checks take numeric tensors only.
  void refuse_values(const std::string& what) const {
    if (!values_reason_.empty()) {
      raise(TSR_UNSUPPORTED, what + " runs models with tensor inputs and outputs of numbers and bools only, but " +
                                 values_reason_ + " (run() takes it)");
    }
  }

  /// A run through tsr_model_run_values: inputs converted to values (checked against each input's kind),
  /// outputs to arrays, lists (sequences) and None (empty optionals).
  static py::list run_values(const ModelPtr& model, const py::sequence& inputs, bool as_dlpack) {
    const std::vector<IoSpec> in = io_specs(model.get(), tsr_model_input_count, tsr_model_input_info);
    const std::vector<IoSpec> out = io_specs(model.get(), tsr_model_output_count, tsr_model_output_info);
    if (inputs.size() != in.size()) {
      invalid("the model has " + std::to_string(in.size()) + " inputs but " + std::to_string(inputs.size()) +
              " were given");
    }
    std::vector<ValuePtr> values;
    std::vector<const tsr_value*> raw;
    for (size_t i = 0; i < in.size(); ++i) {
      values.push_back(input_value(inputs[i], in[i]));
      raw.push_back(values.back().get());
    }
    std::vector<tsr_value*> results(out.size(), nullptr);
    check_without_gil([&] {  // on failure every output is NULL
      return tsr_model_run_values(model.get(), raw.data(), raw.size(), results.data(), results.size());
    });
    std::vector<ValuePtr> owned;
    owned.reserve(results.size());
    for (tsr_value* r : results) owned.push_back(own_value(r));
    values.clear();
    py::list objects;
    for (size_t i = 0; i < owned.size(); ++i) objects.append(output_object(owned[i].release(), out[i].name, as_dlpack));
    return objects;
  }

  /// One DLTensor per model input (in model order), checked against the model's count and dtypes.
  static void hold_inputs(const ModelPtr& model, const py::sequence& inputs, RunInputs& held) {
    const size_t num_inputs = tsr_model_input_count(model.get());
    if (inputs.size() != num_inputs) {
      invalid("the model has " + std::to_string(num_inputs) + " inputs but " + std::to_string(inputs.size()) +
              " were given");
    }
    for (size_t i = 0; i < num_inputs; ++i) {
      tsr_value_info info{};
      info.struct_size = sizeof(info);
      check(tsr_model_input_info(model.get(), i, &info));
      held.add(inputs[i], info.name, info.dtype);
    }
  }

  std::vector<SharedOutput> run_raw(const ModelPtr& model, const py::sequence& inputs, tsr_run_profile* profile) const {
    const size_t num_outputs = tsr_model_output_count(model.get());
    RunInputs held;
    hold_inputs(model, inputs, held);
    std::vector<DLManagedTensor*> raw(num_outputs, nullptr);
    const std::vector<DLTensor>& in = held.tensors();
    check_without_gil([&] {  // on failure every output is NULL
      return profile ? tsr_model_run_with_profile(model.get(), in.data(), in.size(), raw.data(), raw.size(), profile)
                     : tsr_model_run_alloc(model.get(), in.data(), in.size(), raw.data(), raw.size());
    });
    std::vector<SharedOutput> outputs;
    outputs.reserve(raw.size());
    for (DLManagedTensor* m : raw) outputs.push_back(share(m));
    return outputs;
  }

  py::list wrap_outputs(const ModelPtr& model, const std::vector<SharedOutput>& outputs, bool as_dlpack) const {
    py::list result;
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (as_dlpack) {
        result.append(Tensor(outputs[i]));
      } else {
        tsr_value_info info{};
        info.struct_size = sizeof(info);
        check(tsr_model_output_info(model.get(), i, &info));
        result.append(numpy_view(outputs[i], info.name));
      }
    }
    return result;
  }

  ModelPtr model_;
  std::string values_reason_;  // why runs go through tsr_model_run_values, "" when they need not
};

// ----------------------------------------------------------------- source --

class Source {
 public:
  static Source load_path(const std::string& path, const Options* options) {
    tsr_source* source = nullptr;
    const char* file = c_text(path);
    check_without_gil([&] { return tsr_source_load(file, native(options), &source); });
    return Source(source);
  }
  static Source load_bytes(const py::bytes& bytes, const std::string& name, const Options* options) {
    const std::string_view data = bytes;
    tsr_source* source = nullptr;
    const char* label = c_text(name);
    check_without_gil([&] { return tsr_source_load_from_memory(data.data(), data.size(), label, native(options), &source); });
    return Source(source);
  }

  py::list inputs() const { return value_infos(source_.get(), tsr_source_input_count, tsr_source_input_info); }
  py::list outputs() const { return value_infos(source_.get(), tsr_source_output_count, tsr_source_output_info); }

  Model compile(const Options* options) const {
    tsr_model* model = nullptr;
    check_without_gil([&] { return tsr_source_compile(source_.get(), native(options), &model); });
    return Model(model);
  }

 private:
  explicit Source(tsr_source* source) : source_(source, tsr_source_free) {}
  std::shared_ptr<tsr_source> source_;
};


void bind_model(py::module_& m) {
  // Static quantization (tessera.quantize): samples is a list of lists of arrays (one per model input,
  // in input order), or empty for `random` random samples; progress(phase, done, total) may be None.
  m.def("quantize", [](const std::string& model, const std::string& output, const Options* options, py::list samples,
                       const std::string& method, double percentile, bool per_channel, const std::string& exclude,
                       int random, uint64_t seed, py::object progress, bool weights_only) {
    PythonProgress state{progress, ""};
    tsr_quantize_config config{};
    config.struct_size = sizeof(config);
    config.method = c_text(method);
    config.percentile = percentile;
    config.per_channel = per_channel ? 1 : 0;
    config.weights_only = weights_only ? 1 : 0;
    config.exclude = exclude.empty() ? nullptr : c_text(exclude);
    config.random_samples = random;
    config.seed = seed;
    state.install(config.progress, config.progress_user, config.stop);
    tsr_quantizer* raw = nullptr;
    check(tsr_quantizer_create(c_text(model), native(options), &config, &raw));
    std::unique_ptr<tsr_quantizer, void (*)(tsr_quantizer*)> quantizer(raw, tsr_quantizer_free);
    for (size_t k = 0; k < samples.size(); ++k) {
      RunInputs inputs;
      py::list tensors = py::reinterpret_borrow<py::list>(samples[k]);
      for (size_t i = 0; i < tensors.size(); ++i) {
        inputs.add(tensors[i], "sample " + std::to_string(k) + " input " + std::to_string(i), DLDataType{kDLFloat, 32, 1});
      }
      check(tsr_quantizer_add_sample(quantizer.get(), inputs.tensors().data(), inputs.tensors().size()));
    }
    char* summary = nullptr;
    const char* file = c_text(output);
    tsr_status* status = nullptr;
    {
      py::gil_scoped_release release;
      status = tsr_quantizer_write(quantizer.get(), file, &summary);
    }
    state.check_after(status, "quantize");  // a raising callback stopped it: nothing was written
    std::string text = summary ? summary : "";
    tsr_string_free(summary);
    return text;
  });
  // Measured placement (tessera.tune): writes the tuning record, returns the summary table.
  m.def("tune", [](const std::string& model, const std::string& output, const Options* options, double budget,
                   py::object progress) {
    PythonProgress state{progress, ""};
    tsr_tune_config config{};
    config.struct_size = sizeof(config);
    config.budget_seconds = budget;
    state.install(config.progress, config.progress_user, config.stop);
    char* summary = nullptr;
    const char* model_file = c_text(model);
    const char* file = c_text(output);
    tsr_status* status = nullptr;
    {
      py::gil_scoped_release release;
      status = tsr_tune(model_file, native(options), &config, file, &summary);
    }
    state.check_after(status, "tune");  // a raising callback stopped it: no record was written
    std::string text = summary ? summary : "";
    tsr_string_free(summary);
    return text;
  });
  py::class_<Model>(m, "Model")
      .def_static("load_path", &Model::load_path, py::arg("path"), py::arg("options").none(true))
      .def_static("load_bytes", &Model::load_bytes, py::arg("data"), py::arg("name"), py::arg("options").none(true))
      .def("inputs", &Model::inputs)
      .def("outputs", &Model::outputs)
      .def("save", &Model::save)
      .def("to_bytes", &Model::to_bytes)
      .def("placement", &Model::placement)
      .def("warnings", [](const Model& m) {
        py::list result;
        const std::string text = tsr_model_warnings(m.get().get());
        for (size_t start = 0; start < text.size();) {
          size_t end = text.find('\n', start);
          if (end == std::string::npos) end = text.size();
          result.append(text.substr(start, end - start));
          start = end + 1;
        }
        return result;
      })
      .def("regions", &Model::regions)
      .def("summary", &Model::summary)
      .def("stats", &Model::stats)
      .def("run", &Model::run, py::arg("inputs"), py::arg("as_dlpack") = false)
      .def("run_bound", &Model::run_bound, py::arg("inputs"), py::arg("outputs"), py::arg("as_dlpack") = false)
      .def("profile", &Model::profile, py::arg("inputs"), py::arg("runs"), py::arg("as_dlpack") = false)
      .def("report", &Model::report)
      .def("check", &Model::check_accuracy, py::arg("inputs"), py::arg("tolerance"), py::arg("min_cosine"),
           py::arg("float64_reference"), py::arg("name"))
      .def("close", &Model::close)
      .def_property_readonly("closed", &Model::closed);

  py::class_<Source>(m, "Source")
      .def_static("load_path", &Source::load_path, py::arg("path"), py::arg("options").none(true))
      .def_static("load_bytes", &Source::load_bytes, py::arg("data"), py::arg("name"), py::arg("options").none(true))
      .def("inputs", &Source::inputs)
      .def("outputs", &Source::outputs)
      .def("compile", &Source::compile, py::arg("options").none(true));
}

}  // namespace tessera_py
