// The placement report as a Graphviz digraph: one cluster per region, nodes
// filled with their backend's colour (the same palette as the HTML page),
// graph inputs and outputs as house shapes, edges labelled with short types.
// Constants and folded nodes are not drawn (a model has too many); each node
// counts its constant inputs in its label instead. Identifiers are generated
// (n12, in3, out4), so names only ever appear inside escaped strings.
#include <sstream>

#include "ir/error.h"
#include "report/report_internal.h"

namespace tessera {
namespace {

using report_detail::dot_escape;
using report_detail::kFoldedBackend;
using report_detail::shorten;

constexpr size_t kMaxEdgeLabel = 24;

bool is_drawn_node(const ReportNode& node) { return node.backend != kFoldedBackend; }

bool is_drawn_input(const ReportValue& value) { return value.graph_input && !value.constant && value.producer < 0; }

std::string node_statement(const PlacementReport& report, size_t index) {
  const ReportNode& node = report.nodes[index];
  std::string label = node.op_type + "\n" + shorten(node.name, 40);
  const int64_t constants = report_detail::constant_input_count(report, node);
  if (constants > 0) label += str_cat("\n+", constants, constants == 1 ? " constant" : " constants");
  if (node.milliseconds >= 0) label += str_cat("\n", report_detail::format_milliseconds(node.milliseconds));
  std::string tooltip = node.name + " (" + node.op_type + ") on " + node.backend;
  if (!node.why.empty()) tooltip += ": " + node.why;
  return str_cat("n", index, " [label=\"", dot_escape(label), "\", fillcolor=\"",
                 report_detail::backend_colour(report, node.backend), "\", color=\"",
                 report_detail::backend_border_colour(report, node.backend), "\", tooltip=\"", dot_escape(tooltip),
                 "\"];");
}

// The DOT identifier of what produces a value, or "" when it is not drawn.
std::string source_of(const PlacementReport& report, int64_t value_index) {
  const ReportValue& value = report.values[static_cast<size_t>(value_index)];
  if (value.constant) return "";
  if (value.producer >= 0) {
    return is_drawn_node(report.nodes[static_cast<size_t>(value.producer)]) ? str_cat("n", value.producer) : "";
  }
  return is_drawn_input(value) ? str_cat("in", value_index) : "";
}

std::string edge_statement(const PlacementReport& report, const std::string& source, const std::string& target,
                           int64_t value_index) {
  const ReportValue& value = report.values[static_cast<size_t>(value_index)];
  std::string statement = source + " -> " + target;
  if (!value.type.empty() && report_detail::printable(value.type).size() <= kMaxEdgeLabel) {
    statement += " [label=\"" + dot_escape(value.type) + "\"]";
  }
  return statement + ";";
}

}  // namespace

std::string render_report_dot(const PlacementReport& report) {
  report_detail::check_report(report);
  std::ostringstream out;
  size_t folded = 0, constants = 0;
  for (const ReportNode& node : report.nodes) folded += is_drawn_node(node) ? 0 : 1;
  for (const ReportValue& value : report.values) constants += value.constant ? 1 : 0;
  const std::string title = str_cat(report.model, " (", folded, folded == 1 ? " folded node and " : " folded nodes and ",
                                    constants, constants == 1 ? " constant not drawn)" : " constants not drawn)");
  out << "digraph placement {\n"
      << "  graph [label=\"" << dot_escape(title) << "\", labelloc=t, fontname=\"Helvetica\"];\n"
      << "  node [shape=box, style=\"filled,rounded\", fontname=\"Helvetica\", fontsize=10];\n"
      << "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n";

  for (size_t index = 0; index < report.values.size(); ++index) {
    const ReportValue& value = report.values[index];
    if (is_drawn_input(value)) {
      out << "  in" << index << " [shape=invhouse, style=filled, fillcolor=\"#ffffff\", label=\""
          << dot_escape("input\n" + shorten(value.name, 40) + "\n" + shorten(value.type, 40)) << "\"];\n";
    }
  }
  for (size_t region_index = 0; region_index < report.regions.size(); ++region_index) {
    const ReportRegion& region = report.regions[region_index];
    const std::string label =
        str_cat("region ", region_index, ": ", region.backend, " (", region.nodes.size(),
                region.nodes.size() == 1 ? " node)" : " nodes)");
    out << "  subgraph cluster_" << region_index << " {\n"
        << "    label=\"" << dot_escape(label) << "\"; style=\"rounded,dashed\"; color=\""
        << report_detail::backend_border_colour(report, region.backend) << "\";\n";
    for (int64_t node : region.nodes) {
      if (is_drawn_node(report.nodes[static_cast<size_t>(node)])) {
        out << "    " << node_statement(report, static_cast<size_t>(node)) << "\n";
      }
    }
    out << "  }\n";
  }
  // Executed nodes that no region lists still appear, outside any cluster.
  for (size_t index = 0; index < report.nodes.size(); ++index) {
    const ReportNode& node = report.nodes[index];
    if (is_drawn_node(node) && node.region < 0) out << "  " << node_statement(report, index) << "\n";
  }

  for (size_t index = 0; index < report.nodes.size(); ++index) {
    if (!is_drawn_node(report.nodes[index])) continue;
    for (int64_t value : report.nodes[index].inputs) {
      const std::string source = source_of(report, value);
      if (!source.empty()) out << "  " << edge_statement(report, source, str_cat("n", index), value) << "\n";
    }
  }
  for (size_t index = 0; index < report.values.size(); ++index) {
    const ReportValue& value = report.values[index];
    if (!value.graph_output) continue;
    out << "  out" << index << " [shape=house, style=filled, fillcolor=\"#ffffff\", label=\""
        << dot_escape("output\n" + shorten(value.name, 40) + "\n" + shorten(value.type, 40)) << "\"];\n";
    const std::string source = source_of(report, static_cast<int64_t>(index));
    if (!source.empty()) {
      out << "  " << edge_statement(report, source, str_cat("out", index), static_cast<int64_t>(index)) << "\n";
    }
  }
  out << "}\n";
  return out.str();
}

}  // namespace tessera
