// The C API: Running a model (caller buffers, allocated outputs, profiles), the accuracy check and the reports. Nothing here throws (guarded).
#include <cstring>

#include "capi/capi_internal.h"
#include "ir/shape_util.h"

using namespace tessera::capi;  // NOLINT: the shared helpers

extern "C" {

namespace {

/// tsr_model_run and tsr_model_run_bound: outputs[i] NULL (bound only) is allocated into out_allocated[i].
void run_with_buffers(const tsr_model* model, const DLTensor* inputs, size_t num_inputs, const DLTensor* const* outputs,
                      DLManagedTensor** out_allocated, size_t num_outputs) {
  std::vector<tessera::TensorView> in = input_views(model, inputs, num_inputs, true);
  const auto& descs = model->compiled->outputs();
  if (num_outputs != descs.size()) {
    tessera::throw_user_error("the model has ", descs.size(), " outputs but ", num_outputs, " were given");
  }
  std::vector<tessera::TensorView> out_views(num_outputs);
  std::vector<tessera::TensorView*> out_ptrs(num_outputs, nullptr);
  for (size_t i = 0; i < num_outputs; ++i) {
    if (!outputs[i]) continue;
    // An output with open dims is known in shape only once the run has made it: the buffer must have
    // that shape (checked then).
    out_views[i] = view_of(*outputs[i], descs[i], "output '" + descs[i].name + "'", true, true);
    out_ptrs[i] = &out_views[i];
  }
  std::vector<tessera::TensorView> bound;  // the given buffers, for the overlap check (unbound: empty views)
  for (size_t i = 0; i < num_outputs; ++i) bound.push_back(out_views[i]);
  check_no_overlap(in, bound, model);
  std::vector<tessera::Tensor> made = model->compiled->run(in, out_ptrs);
  if (!out_allocated) return;
  std::vector<std::unique_ptr<ManagedOutput>> holders(num_outputs);
  for (size_t i = 0; i < num_outputs; ++i) {
    if (!outputs[i]) holders[i] = managed_holder(made[i]);
  }
  for (size_t i = 0; i < num_outputs; ++i) out_allocated[i] = holders[i] ? &holders[i].release()->managed : nullptr;
}

}  // namespace

tsr_status* tsr_model_run(const tsr_model* model, const DLTensor* inputs, size_t num_inputs, DLTensor* outputs,
                          size_t num_outputs) {
  if (!model) return null_argument("model");
  return guarded([&] {
    if (num_outputs && !outputs) tessera::throw_user_error("outputs is NULL");
    std::vector<const DLTensor*> each(num_outputs);
    for (size_t i = 0; i < num_outputs; ++i) each[i] = &outputs[i];
    run_with_buffers(model, inputs, num_inputs, each.data(), nullptr, num_outputs);
  });
}

tsr_status* tsr_model_run_bound(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                                const DLTensor* const* outputs, DLManagedTensor** out_allocated, size_t num_outputs) {
  if (!model) return null_argument("model");
  if (!out_allocated) return null_argument("out_allocated");
  for (size_t i = 0; i < num_outputs; ++i) out_allocated[i] = nullptr;
  return guarded([&] {
    if (num_outputs && !outputs) tessera::throw_user_error("outputs is NULL");
    run_with_buffers(model, inputs, num_inputs, outputs, out_allocated, num_outputs);
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

tsr_status* tsr_model_check(const tsr_model* model, const DLTensor* inputs, size_t num_inputs,
                            const tsr_check_config* config, char** out_table, char** out_json, char** out_html,
                            size_t* out_flagged) {
  if (!model) return null_argument("model");
  if (out_table) *out_table = nullptr;
  if (out_json) *out_json = nullptr;
  if (out_html) *out_html = nullptr;
  if (out_flagged) *out_flagged = 0;
  return guarded([&] {
    // Members past the caller's struct_size keep their defaults.
    auto has = [&](size_t end) { return config && config->struct_size >= end; };
#define TSR_CHECK_HAS(member) has(offsetof(tsr_check_config, member) + sizeof(config->member))
    if (config && config->struct_size < sizeof(size_t)) tessera::throw_user_error("tsr_check_config: struct_size is too small");
    const double tolerance = TSR_CHECK_HAS(tolerance) ? config->tolerance : -1.0;
    const double min_cosine = TSR_CHECK_HAS(min_cosine) ? config->min_cosine : -1.0;
    const bool float64_reference = TSR_CHECK_HAS(float64_reference) && config->float64_reference != 0;
    const char* model_name = TSR_CHECK_HAS(model_name) ? config->model_name : nullptr;
#undef TSR_CHECK_HAS
    if (std::isnan(tolerance) || std::isnan(min_cosine) || min_cosine > 1) {
      tessera::throw_user_error("check: tolerance must be a number and min_cosine at most 1");
    }
    std::vector<tessera::TensorView> in = input_views(model, inputs, num_inputs);
    tessera::CheckOptions options;
    options.tolerance = tolerance;
    options.min_cosine = min_cosine;
    options.float64_reference = float64_reference;
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
      if (profile->struct_size >= offsetof(tsr_run_profile, num_inner_nodes) + sizeof(size_t) && profile->inner_node_milliseconds) {
        // Flattened in row order (tsr_model_inner_node); check_profile checked the count.
        size_t k = 0;
        for (size_t row = 0; row < model->compiled->placement().size(); ++row) {
          const size_t count = model->compiled->inner_placement(row).size();
          if (count == 0) continue;
          measured.inner_node_milliseconds.resize(row + 1);
          measured.inner_node_milliseconds[row].assign(profile->inner_node_milliseconds + k, profile->inner_node_milliseconds + k + count);
          k += count;
        }
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

}  // extern "C"
