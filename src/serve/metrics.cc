// /metrics: Prometheus text format (version 0.0.4) with Triton's metric names and
// labels, so dashboards and autoscaler rules written for Triton read it; Tessera's
// own counters named by Prometheus's conventions; the process's resident memory.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "server_state.h"

namespace tessera::serve {
namespace {

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

/// Milliseconds as seconds, to the microsecond (a sample value).
std::string seconds(double milliseconds) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6f", milliseconds / 1000.0);
  return text;
}

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

}  // namespace

std::string render_metrics(ServerState& state) {
  struct Row {
    std::string labels;
    ModelStats stats;
  };
  std::vector<Row> rows;
  for (const auto& model : state.repository.loaded()) {
    rows.push_back({"model=\"" + escape_label(model->name()) + "\",version=\"" + escape_label(model->version()) + "\"",
                    model->stats()});
  }
  std::ostringstream out;
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
    for (const Row& r : rows) out << name << "{" << r.labels << "} " << value(r.stats) << "\n";
  };
  family("nv_inference_request_success", "counter", "Number of successful inference requests, all batch sizes",
         [](const ModelStats& s) { return s.success.count; });
  out << "# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes\n"
         "# TYPE nv_inference_request_failure counter\n";
  for (const Row& r : rows) {
    for (const char* reason : {"REJECTED", "CANCELED", "BACKEND", "OTHER"}) {
      auto it = r.stats.failures.find(reason);
      out << "nv_inference_request_failure{" << r.labels << ",reason=\"" << reason << "\"} "
          << (it == r.stats.failures.end() ? 0 : it->second) << "\n";
    }
  }
  family("nv_inference_count", "counter", "Number of inferences performed (a batch of n counts n)",
         [](const ModelStats& s) { return s.inference_count; });
  family("nv_inference_exec_count", "counter", "Number of model executions performed (a batch counts once)",
         [](const ModelStats& s) { return s.execution_count; });
  family("nv_inference_pending_request_count", "gauge", "Instantaneous number of requests awaiting execution",
         [](const ModelStats& s) { return s.pending; });
  family("nv_inference_request_duration_us", "counter", "Cumulative inference request duration in microseconds",
         [](const ModelStats& s) { return (s.success.ns + s.fail.ns) / 1000; });
  family("nv_inference_queue_duration_us", "counter", "Cumulative inference queuing duration in microseconds",
         [](const ModelStats& s) { return s.queue.ns / 1000; });
  family("nv_inference_compute_input_duration_us", "counter", "Cumulative compute input duration in microseconds",
         [](const ModelStats& s) { return s.compute_input.ns / 1000; });
  family("nv_inference_compute_infer_duration_us", "counter", "Cumulative compute inference duration in microseconds",
         [](const ModelStats& s) { return s.compute_infer.ns / 1000; });
  family("nv_inference_compute_output_duration_us", "counter", "Cumulative inference compute output duration in microseconds",
         [](const ModelStats& s) { return s.compute_output.ns / 1000; });
  // Tessera's own, from the compiled model (tsr_model_stats), named as Prometheus asks (counters end in
  // _total, times in seconds; `promtool check metrics` finds nothing to say of them, where Triton's names
  // above, kept for the dashboards that read them, draw its naming lints): per-shape preparation of
  // open-dims regions (oneDNN primitives) and working memory allocated during runs; both settle at 0 new
  // per run once the shapes seen repeat.
  family("tessera_model_runs_total", "counter", "Model runs (tsr_model_stats)",
         [](const ModelStats& s) { return s.runtime.runs; });
  family("tessera_shape_cache_hits_total", "counter", "Runs of open-dims regions that found their per-shape state ready",
         [](const ModelStats& s) { return s.runtime.shape_cache_hits; });
  family("tessera_shape_cache_misses_total", "counter", "Runs of open-dims regions that prepared state for a new shape",
         [](const ModelStats& s) { return s.runtime.shape_cache_misses; });
  family("tessera_shape_prepare_seconds_total", "counter", "Cumulative time preparing per-shape state",
         [](const ModelStats& s) { return seconds(s.runtime.shape_prepare_milliseconds); });
  family("tessera_shape_fallbacks_total", "counter",
         "Region runs that could not run at the call's shapes and ran on native",
         [](const ModelStats& s) { return s.runtime.shape_fallbacks; });
  family("tessera_shape_deferrals_total", "counter",
         "Region runs at shapes not yet prepared that ran on native, as cheaper than preparing them",
         [](const ModelStats& s) { return s.runtime.shape_deferrals; });
  family("tessera_run_allocations_total", "counter", "Working-memory allocations made during runs (not reused)",
         [](const ModelStats& s) { return s.runtime.allocations; });
  out << "# HELP tessera_region_seconds_total Cumulative time in each region of the plan (copies in and out "
         "included)\n# TYPE tessera_region_seconds_total counter\n";
  for (const Row& r : rows) {
    for (size_t i = 0; i < r.stats.regions.size(); ++i) {
      out << "tessera_region_seconds_total{" << r.labels << ",region=\"" << i << "\",backend=\""
          << escape_label(r.stats.regions[i].backend) << "\"} " << seconds(r.stats.regions[i].milliseconds) << "\n";
    }
  }
  out << "# HELP process_resident_memory_bytes Resident memory size in bytes\n"
         "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes "
      << resident_bytes() << "\n";
  return out.str();
}

}  // namespace tessera::serve
