// The placement report as one JSON object with a stable key order: backends,
// regions (nodes and boundary values by name), nodes (placement, reasons,
// refusals per backend), values and copies. Names are referred to by name
// rather than index so the file reads on its own; indices are kept beside
// them ("region", "producer") where a tool needs to join.
#include <sstream>

#include "report/report_internal.h"

namespace tessera {
namespace {

using report_detail::json_milliseconds;
using report_detail::json_string;

void write_value_names(const PlacementReport& report, const std::vector<int64_t>& values, std::ostream& out) {
  out << "[";
  for (size_t position = 0; position < values.size(); ++position) {
    out << (position ? ", " : "") << json_string(report.values[static_cast<size_t>(values[position])].name);
  }
  out << "]";
}

void write_regions(const PlacementReport& report, std::ostream& out) {
  out << "  \"regions\": [";
  for (size_t index = 0; index < report.regions.size(); ++index) {
    const ReportRegion& region = report.regions[index];
    out << (index ? ",\n" : "\n") << "    {\"index\": " << index << ", \"backend\": " << json_string(region.backend)
        << ", \"memory_space\": " << json_string(region.memory_space)
        << ", \"milliseconds\": " << json_milliseconds(region.milliseconds) << ",\n     \"nodes\": [";
    for (size_t position = 0; position < region.nodes.size(); ++position) {
      out << (position ? ", " : "") << json_string(report.nodes[static_cast<size_t>(region.nodes[position])].name);
    }
    out << "],\n     \"inputs\": ";
    write_value_names(report, region.inputs, out);
    out << ",\n     \"outputs\": ";
    write_value_names(report, region.outputs, out);
    out << ",\n     \"composites\": [";
    for (size_t position = 0; position < region.composites.size(); ++position) {
      out << (position ? ", " : "") << json_string(region.composites[position]);
    }
    out << "]}";
  }
  out << (report.regions.empty() ? "],\n" : "\n  ],\n");
}

void write_nodes(const PlacementReport& report, std::ostream& out) {
  out << "  \"nodes\": [";
  for (size_t index = 0; index < report.nodes.size(); ++index) {
    const ReportNode& node = report.nodes[index];
    out << (index ? ",\n" : "\n") << "    {\"name\": " << json_string(node.name)
        << ", \"op_type\": " << json_string(node.op_type) << ", \"backend\": " << json_string(node.backend)
        << ", \"region\": ";
    if (node.region >= 0) {
      out << node.region;
    } else {
      out << "null";
    }
    out << ",\n     \"why\": " << json_string(node.why) << ", \"note\": " << json_string(node.note)
        << ", \"precision\": " << json_string(node.precision.empty() ? "" : node.precision)
        << ", \"precision_note\": " << json_string(node.precision_note)
        << ", \"milliseconds\": " << json_milliseconds(node.milliseconds) << ",\n     \"refusals\": {";
    // An empty refusal list means nobody asked the backends (e.g. a folded node).
    for (size_t backend = 0; backend < node.refusals.size(); ++backend) {
      out << (backend ? ", " : "") << json_string(report.backends[backend]) << ": "
          << json_string(node.refusals[backend]);
    }
    out << "},\n     \"inputs\": ";
    write_value_names(report, node.inputs, out);
    out << ", \"outputs\": ";
    write_value_names(report, node.outputs, out);
    out << ",\n     \"inner\": [";
    for (size_t k = 0; k < node.inner.size(); ++k) {
      const ReportInnerNode& inner = node.inner[k];
      out << (k ? ", " : "") << "{\"path\": " << json_string(inner.path) << ", \"op_type\": " << json_string(inner.op_type)
          << ", \"backend\": " << json_string(inner.backend) << ", \"note\": " << json_string(inner.note);
      out << ", \"milliseconds\": " << json_milliseconds(inner.milliseconds) << "}";
    }
    out << "]}";
  }
  out << (report.nodes.empty() ? "],\n" : "\n  ],\n");
}

void write_values(const PlacementReport& report, std::ostream& out) {
  const auto boolean = [](bool flag) { return flag ? "true" : "false"; };
  out << "  \"values\": [";
  for (size_t index = 0; index < report.values.size(); ++index) {
    const ReportValue& value = report.values[index];
    out << (index ? ",\n" : "\n") << "    {\"name\": " << json_string(value.name)
        << ", \"type\": " << json_string(value.type) << ", \"producer\": ";
    if (value.producer >= 0) {
      out << json_string(report.nodes[static_cast<size_t>(value.producer)].name);
    } else {
      out << "null";
    }
    out << ", \"graph_input\": " << boolean(value.graph_input) << ", \"graph_output\": " << boolean(value.graph_output)
        << ", \"constant\": " << boolean(value.constant) << "}";
  }
  out << (report.values.empty() ? "],\n" : "\n  ],\n");
}

void write_totals(const PlacementReport& report, std::ostream& out) {
  out << "  \"totals\": [";
  const auto totals = report_detail::backend_totals(report);
  for (size_t index = 0; index < totals.size(); ++index) {
    out << (index ? ",\n" : "\n") << "    {\"backend\": " << json_string(totals[index].backend)
        << ", \"nodes\": " << totals[index].nodes << ", \"regions\": " << totals[index].regions
        << ", \"milliseconds\": " << json_milliseconds(totals[index].milliseconds) << "}";
  }
  out << (totals.empty() ? "]\n" : "\n  ]\n");
}

}  // namespace

std::string render_report_json(const PlacementReport& report) {
  report_detail::check_report(report);
  std::ostringstream out;
  out << "{\n  \"model\": " << json_string(report.model) << ",\n  \"backends\": [";
  for (size_t index = 0; index < report.backends.size(); ++index) {
    out << (index ? ", " : "") << json_string(report.backends[index]);
  }
  out << "],\n  \"copies\": {\"per_run\": " << report.copies_per_run
      << ", \"bytes_per_run\": " << report.copy_bytes_per_run << "},\n";
  write_regions(report, out);
  write_nodes(report, out);
  write_values(report, out);
  write_totals(report, out);
  if (report.tuning.present) {
    const ReportTuning& t = report.tuning;
    out << "  ,\"tuning\": {\"chosen\": " << json_string(t.chosen) << ", \"milliseconds\": " << json_milliseconds(t.tuned_milliseconds)
        << ", \"default_milliseconds\": " << json_milliseconds(t.default_milliseconds) << ", \"best_single\": " << json_string(t.best_single)
        << ", \"best_single_milliseconds\": " << json_milliseconds(t.best_single_milliseconds) << ", \"threads\": " << t.threads
        << ", \"cpu\": " << json_string(t.cpu) << ", \"candidates\": [";
    for (size_t i = 0; i < t.candidates.size(); ++i) {
      const ReportTuningCandidate& c = t.candidates[i];
      out << (i ? ",\n" : "\n") << "    {\"name\": " << json_string(c.name) << ", \"description\": " << json_string(c.description)
          << ", \"milliseconds\": " << json_milliseconds(c.milliseconds) << ", \"accepted\": " << (c.accepted ? "true" : "false")
          << ", \"error\": " << json_string(c.error) << "}";
    }
    out << "]}\n";
  }
  out << "}\n";
  return out.str();
}

}  // namespace tessera
