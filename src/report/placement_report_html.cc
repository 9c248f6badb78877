// The placement report as one self-contained HTML page: a legend, an inline
// SVG drawing of the graph (laid out by report_graph_layout.cc, boxes
// coloured by backend with a region badge), a details panel filled from an
// inline JSON block on hover or click, the region table and the refusals.
// Nothing is fetched: a Content-Security-Policy forbids it. Every name goes
// through html_escape, or json_string(..., for_html_script) inside <script>,
// so no name can close an element or start one.
#include <algorithm>
#include <cstdio>
#include <string>

#include "ir/error.h"
#include "report/report_internal.h"

namespace tessera {
namespace {

using report_detail::GraphLayout;
using report_detail::html_escape;
using report_detail::json_string;
using report_detail::kBoxHeight;
using report_detail::kBoxWidth;
using report_detail::LayoutItem;
using report_detail::shorten;

constexpr size_t kMaxBoxText = 24;

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f", value);
  return buffer;
}

std::string script_string(std::string_view text) { return json_string(text, /*for_html_script=*/true); }

void append_legend(const PlacementReport& report, std::string& html) {
  html += "<ul class=\"legend\">\n";
  for (const auto& entry : report_detail::backend_totals(report)) {
    html += "<li><span class=\"swatch\" style=\"background:" + report_detail::backend_colour(report, entry.backend) +
            ";border-color:" + report_detail::backend_border_colour(report, entry.backend) + "\"></span>" +
            html_escape(entry.backend) + str_cat(" <span class=\"count\">", entry.nodes,
                                                 entry.nodes == 1 ? " node, " : " nodes, ", entry.regions,
                                                 entry.regions == 1 ? " region" : " regions");
    if (entry.milliseconds >= 0) html += ", " + report_detail::format_milliseconds(entry.milliseconds);
    html += "</span></li>\n";
  }
  html += "</ul>\n";
}

void append_item_svg(const PlacementReport& report, const LayoutItem& item, size_t item_index, std::string& html) {
  const std::string position = "transform=\"translate(" + number(item.x) + "," + number(item.y) + ")\"";
  const std::string middle = number(kBoxWidth / 2);
  if (item.kind != LayoutItem::Kind::kNode) {
    const ReportValue& value = report.values[static_cast<size_t>(item.index)];
    const bool input = item.kind == LayoutItem::Kind::kGraphInput;
    html += str_cat("<g class=\"item io\" data-index=\"", item_index, "\" ", position, "><rect width=\"",
                    number(kBoxWidth), "\" height=\"", number(kBoxHeight), "\" rx=\"18\"/><text x=\"", middle,
                    "\" y=\"16\" class=\"op\">", input ? "input" : "output", "</text><text x=\"", middle,
                    "\" y=\"31\">", html_escape(shorten(value.name, kMaxBoxText)), "</text><title>",
                    input ? "graph input " : "graph output ", html_escape(value.name), ": ",
                    html_escape(value.type), "</title></g>\n");
    return;
  }
  const ReportNode& node = report.nodes[static_cast<size_t>(item.index)];
  const std::string border = report_detail::backend_border_colour(report, node.backend);
  html += str_cat("<g class=\"item node\" data-index=\"", item_index, "\" ", position, "><rect width=\"",
                  number(kBoxWidth), "\" height=\"", number(kBoxHeight), "\" rx=\"5\" fill=\"",
                  report_detail::backend_colour(report, node.backend), "\" stroke=\"", border,
                  "\"/><text x=\"", middle, "\" y=\"16\" class=\"op\">",
                  html_escape(shorten(node.op_type, kMaxBoxText)), "</text><text x=\"", middle, "\" y=\"31\">",
                  html_escape(shorten(node.name, kMaxBoxText)), "</text>");
  if (node.region >= 0) {
    html += str_cat("<text x=\"", number(kBoxWidth - 4), "\" y=\"11\" class=\"badge\" fill=\"", border, "\">R",
                    node.region, "</text>");
  }
  html += "<title>" + html_escape(node.name) + " (" + html_escape(node.op_type) + ") on " +
          html_escape(node.backend) + (node.why.empty() ? "" : ": " + html_escape(node.why)) + "</title></g>\n";
}

void append_graph_svg(const PlacementReport& report, const GraphLayout& layout, std::string& html) {
  html += "<svg id=\"graph\" role=\"img\" aria-label=\"placement graph\" viewBox=\"0 0 " + number(layout.width) +
          " " + number(layout.height) + "\" data-width=\"" + number(layout.width) + "\" data-height=\"" +
          number(layout.height) +
          "\" preserveAspectRatio=\"xMinYMin meet\">\n<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" "
          "refY=\"5\" markerWidth=\"6\" markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" "
          "fill=\"#777\"/></marker></defs>\n<g id=\"edges\">\n";
  for (const auto& edge : layout.edges) {
    const LayoutItem& from = layout.items[edge.from];
    const LayoutItem& to = layout.items[edge.to];
    const double x1 = from.x + kBoxWidth / 2, y1 = from.y + kBoxHeight;
    const double x2 = to.x + kBoxWidth / 2, y2 = to.y;
    const double bend = std::max(20.0, (y2 - y1) / 2);
    // The layout adds no dummy nodes, so an edge that skips layers would run
    // straight through the boxes between; bow it out to the right instead.
    const double bow = to.layer - from.layer > 1 ? kBoxWidth : 0;
    const ReportValue& value = report.values[static_cast<size_t>(edge.value)];
    html += "<path d=\"M" + number(x1) + "," + number(y1) + "C" + number(x1 + bow) + "," + number(y1 + bend) + " " +
            number(x2 + bow) + "," + number(y2 - bend) + " " + number(x2) + "," + number(y2) + "\"><title>" +
            html_escape(value.name) + ": " + html_escape(value.type) + "</title></path>\n";
  }
  html += "</g>\n<g id=\"items\">\n";
  for (size_t index = 0; index < layout.items.size(); ++index) {
    append_item_svg(report, layout.items[index], index, html);
  }
  html += "</g>\n</svg>\n";
}

// The details the script shows for each drawn item, indexed by data-index.
void append_item_data(const PlacementReport& report, const GraphLayout& layout, std::string& html) {
  const auto value_list = [&](const std::vector<int64_t>& values) {
    std::string list = "[";
    for (size_t position = 0; position < values.size(); ++position) {
      const ReportValue& value = report.values[static_cast<size_t>(values[position])];
      list += str_cat(position ? ",[" : "[", script_string(value.name), ",", script_string(value.type), ",",
                      value.constant ? "1" : "0", "]");
    }
    return list + "]";
  };
  html += "<script type=\"application/json\" id=\"tessera-item-data\">[\n";
  for (size_t index = 0; index < layout.items.size(); ++index) {
    const LayoutItem& item = layout.items[index];
    html += (index ? ",\n{" : "{") + std::string("\"x\":") + number(item.x) + ",\"y\":" + number(item.y) + ",";
    if (item.kind != LayoutItem::Kind::kNode) {
      const ReportValue& value = report.values[static_cast<size_t>(item.index)];
      html += std::string("\"kind\":\"") +
              (item.kind == LayoutItem::Kind::kGraphInput ? "graph input" : "graph output") +
              "\",\"name\":" + script_string(value.name) + ",\"type\":" + script_string(value.type) + "}";
      continue;
    }
    const ReportNode& node = report.nodes[static_cast<size_t>(item.index)];
    html += "\"kind\":\"node\",\"name\":" + script_string(node.name) + ",\"op\":" + script_string(node.op_type) +
            ",\"backend\":" + script_string(node.backend) + str_cat(",\"region\":", node.region) +
            ",\"why\":" + script_string(node.why) + ",\"note\":" + script_string(node.note) + ",\"precision\":" + script_string(node.precision) +
            ",\"precisionNote\":" + script_string(node.precision_note) +
            ",\"ms\":" + report_detail::json_milliseconds(node.milliseconds) + ",\"refusals\":[";
    for (size_t backend = 0; backend < node.refusals.size(); ++backend) {
      html += (backend ? ",[" : "[") + script_string(report.backends[backend]) + "," +
              script_string(node.refusals[backend]) + "]";
    }
    html += "],\"inputs\":" + value_list(node.inputs) + ",\"outputs\":" + value_list(node.outputs) + "}";
  }
  html += "\n]</script>\n";
}

std::string value_names(const PlacementReport& report, const std::vector<int64_t>& values) {
  constexpr size_t kShown = 4;
  std::string text;
  for (size_t position = 0; position < values.size() && position < kShown; ++position) {
    const ReportValue& value = report.values[static_cast<size_t>(values[position])];
    text += (position ? ", " : "") + html_escape(shorten(value.name, 40)) + " <span class=\"type\">" +
            html_escape(shorten(value.type, 40)) + "</span>";
  }
  if (values.size() > kShown) text += str_cat(" … and ", values.size() - kShown, " more");
  return str_cat(values.size(), values.empty() ? "" : ": ", text);
}

void append_region_table(const PlacementReport& report, std::string& html) {
  html += "<h2>Regions</h2>\n<table class=\"regions\"><thead><tr><th>Region</th><th>Backend</th><th>Memory</th>"
          "<th>Nodes</th><th>Inputs</th><th>Outputs</th><th>Fused</th><th>Time</th></tr></thead><tbody>\n";
  for (size_t index = 0; index < report.regions.size(); ++index) {
    const ReportRegion& region = report.regions[index];
    std::string fused;
    for (const std::string& composite : region.composites) fused += (fused.empty() ? "" : "<br>") + html_escape(composite);
    html += str_cat("<tr><td>", index, "</td><td><span class=\"swatch\" style=\"background:",
                    report_detail::backend_colour(report, region.backend), "\"></span>", html_escape(region.backend),
                    "</td><td>", html_escape(region.memory_space), "</td><td>", region.nodes.size(), "</td><td>",
                    value_names(report, region.inputs), "</td><td>", value_names(report, region.outputs), "</td><td>",
                    fused, "</td><td>", report_detail::format_milliseconds(region.milliseconds), "</td></tr>\n");
  }
  if (report.regions.empty()) html += "<tr><td colspan=\"8\">No regions: nothing runs.</td></tr>\n";
  html += str_cat("</tbody></table>\n<p>Copies between memory spaces: ", report.copies_per_run, " per run, ",
                  report_detail::format_bytes(report.copy_bytes_per_run), " (", report.copy_bytes_per_run,
                  " bytes).</p>\n");
}

void append_refusals(const PlacementReport& report, std::string& html) {
  constexpr size_t kNamesShown = 6;
  const auto groups_per_backend = report_detail::group_refusals(report);
  html += "<h2>Refusals</h2>\n";
  for (size_t backend = 0; backend < report.backends.size(); ++backend) {
    const auto& groups = groups_per_backend[backend];
    size_t refused = 0;
    for (const auto& group : groups) refused += group.nodes.size();
    html += str_cat("<details", refused ? "" : " class=\"none\"", "><summary>Backend ",
                    html_escape(report.backends[backend]), " refused ", refused, refused == 1 ? " node" : " nodes",
                    "</summary><ul>\n");
    for (const auto& group : groups) {
      std::string names;
      for (size_t position = 0; position < group.nodes.size() && position < kNamesShown; ++position) {
        names += (position ? ", " : "") + html_escape(report.nodes[static_cast<size_t>(group.nodes[position])].name);
      }
      if (group.nodes.size() > kNamesShown) names += str_cat(" … and ", group.nodes.size() - kNamesShown, " more");
      html += str_cat("<li><b>", html_escape(group.op_type), " ×", group.nodes.size(), "</b>: ",
                      html_escape(group.reason), " <span class=\"names\">(", names, ")</span></li>\n");
    }
    html += "</ul></details>\n";
  }
}

void append_tuning(const PlacementReport& report, std::string& html) {
  const ReportTuning& t = report.tuning;
  if (!t.present) return;
  html += str_cat("<h2>Tuning</h2>\n<p>Placement '", html_escape(t.chosen), "' chosen by measurement (", t.threads,
                  t.threads == 1 ? " thread, " : " threads, ", html_escape(t.cpu), "): ",
                  report_detail::format_milliseconds(t.tuned_milliseconds), " against ",
                  report_detail::format_milliseconds(t.default_milliseconds), " by default and ",
                  report_detail::format_milliseconds(t.best_single_milliseconds), " for the best single backend (",
                  html_escape(t.best_single), ").</p>\n<table class=\"regions\"><thead><tr><th>Candidate</th><th>What it changes</th>"
                  "<th>Time</th><th>Kept</th></tr></thead><tbody>\n");
  for (const ReportTuningCandidate& c : t.candidates) {
    html += str_cat("<tr><td>", html_escape(c.name), "</td><td>", html_escape(c.error.empty() ? c.description : c.description + ": " + c.error),
                    "</td><td>", c.milliseconds >= 0 ? report_detail::format_milliseconds(c.milliseconds) : std::string("failed"),
                    "</td><td>", c.accepted ? "fastest so far" : "", "</td></tr>\n");
  }
  html += "</tbody></table>\n";
}

}  // namespace

std::string render_report_html(const PlacementReport& report) {
  report_detail::check_report(report);
  const GraphLayout layout = report_detail::layout_report_graph(report);
  size_t drawn_nodes = 0, folded = 0, constants = 0;
  for (const LayoutItem& item : layout.items) drawn_nodes += item.kind == LayoutItem::Kind::kNode ? 1 : 0;
  for (const ReportNode& node : report.nodes) folded += node.backend == report_detail::kFoldedBackend ? 1 : 0;
  for (const ReportValue& value : report.values) constants += value.constant ? 1 : 0;

  std::string html;
  html.reserve(4096 + layout.items.size() * 900 + layout.edges.size() * 160);
  html += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
          "script-src 'unsafe-inline'; img-src data:\">\n<title>Placement of " +
          html_escape(report.model) + "</title>\n<style>\n";
  html += report_detail::kHtmlStyle;
  html += str_cat("</style>\n</head>\n<body data-rendered=\"no-script\" data-expected-node-count=\"", drawn_nodes,
                  "\">\n<header><h1>Placement of ", html_escape(report.model), "</h1>\n<p>", drawn_nodes,
                  " nodes run in ", report.regions.size(), report.regions.size() == 1 ? " region" : " regions",
                  "; ", folded, " folded at compile time and ", constants,
                  constants == 1 ? " constant" : " constants", " not drawn. Backends in priority order: ");
  for (size_t index = 0; index < report.backends.size(); ++index) {
    html += (index ? ", " : "") + html_escape(report.backends[index]);
  }
  html += ".</p>\n";
  append_legend(report, html);
  html += "<div class=\"tools\"><button type=\"button\" id=\"fit\">Fit all</button> <button type=\"button\" "
          "id=\"top\">Top, 1:1</button> <input id=\"search\" type=\"search\" placeholder=\"Find a node by name "
          "(Enter)\"> <span class=\"hint\">Wheel to zoom, drag to pan, click a node to pin its details.</span>"
          "</div>\n</header>\n<main>\n<div id=\"canvas\">\n";
  append_graph_svg(report, layout, html);
  html += "</div>\n<aside id=\"details\"><p class=\"hint\">Hover or click a node for its placement.</p></aside>\n"
          "</main>\n<section>\n";
  append_region_table(report, html);
  append_refusals(report, html);
  append_tuning(report, html);
  html += "</section>\n";
  append_item_data(report, layout, html);
  html += "<script>\n";
  html += report_detail::kHtmlScript;
  html += "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace tessera
