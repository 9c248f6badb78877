// Renders accuracy check reports (check_report.h) as a text table and JSON.
#include "report/check_report.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "report/report_internal.h"

namespace tessera {
namespace {

std::string number(double value, const char* format = "%.3g") {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  char text[64];
  std::snprintf(text, sizeof(text), format, value);
  return text;
}

std::string json_number(double value) {
  if (!std::isfinite(value)) return "null";
  char text[64];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

std::string pad(std::string text, size_t width, bool left = false) {
  if (text.size() >= width) return text;
  const std::string fill(width - text.size(), ' ');
  return left ? fill + text : text + fill;
}

}  // namespace

std::string render_check_table(const CheckReport& report) {
  using report_detail::printable;
  std::ostringstream out;
  out << "Accuracy of '" << printable(report.model) << "' region by region against " << printable(report.reference)
      << " (each region's own inputs from this run):\n\n";
  out << "Region  Backend   Nodes  Precision         Output                          Max abs err  Rel err   Cosine     \n";
  for (const CheckedRegion& region : report.regions) {
    const std::string head = pad(std::to_string(region.index), 6, true) + "  " +
                             pad(report_detail::shorten(region.backend, 8), 8) + pad(std::to_string(region.node_count), 7, true) +
                             "  " + pad(region.precision, 16) + "  ";
    if (!region.compared) {
      out << head << (region.note.empty() ? std::string("(the reference itself)") : "not checked: " + printable(region.note))
          << "\n";
      continue;
    }
    bool first = true;
    for (const CheckedOutput& output : region.outputs) {
      out << (first ? head : std::string(head.size(), ' '));
      first = false;
      out << pad(report_detail::shorten(output.name, 30), 30) << "  ";
      if (!output.floating) {
        out << (output.mismatches ? std::to_string(output.mismatches) + " of " + std::to_string(output.elements) +
                                        " elements differ"
                                  : std::string("exact"));
      } else {
        out << pad(number(output.max_abs_error), 11, true) << "  " << pad(number(output.relative_error), 8, true) << "  "
            << pad(number(output.cosine, "%.6f"), 9, true);
        if (output.mismatches) out << "  " << output.mismatches << " non-finite mismatches";
      }
      out << (output.within_tolerance ? "" : "  <-- over tolerance") << "\n";
    }
    if (region.outputs.empty()) out << head << "(no outputs)\n";
  }
  out << "\n";
  size_t compared = 0;
  for (const CheckedRegion& region : report.regions) compared += region.compared ? 1 : 0;
  if (report.regions_over_tolerance == 0) {
    out << compared << (compared == 1 ? " region" : " regions") << " checked, all within tolerance.\n";
  } else {
    out << report.regions_over_tolerance << " of " << compared << " checked regions over tolerance:";
    for (const CheckedRegion& region : report.regions) {
      if (region.within_tolerance) continue;
      out << "\n  region " << region.index << " (" << printable(region.backend) << ", " << region.node_count
          << " nodes from '" << printable(region.first_node) << "', " << region.precision
          << "): allowed relative error " << number(region.tolerance);
      if (region.min_cosine > 0) out << ", cosine >= " << number(region.min_cosine, "%.4g");
    }
    out << "\n";
  }
  return out.str();
}

std::string render_check_html(const CheckReport& report) {
  using report_detail::html_escape;
  std::ostringstream out;
  size_t compared = 0;
  for (const CheckedRegion& region : report.regions) compared += region.compared ? 1 : 0;
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Accuracy of "
      << html_escape(report.model) << "</title>\n<style>\n"
      << "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse}\n"
      << "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}td.n{text-align:right;font-variant-numeric:tabular-nums}\n"
      << "tr.over td{background:#fdd}tr.reference td{color:#888}.summary{margin:1em 0;font-weight:600}\n"
      << "</style></head><body>\n<h1>Accuracy of " << html_escape(report.model) << "</h1>\n<p>Each region against "
      << html_escape(report.reference) << ", on the inputs it read in this run.</p>\n<p class=\"summary\" id=\"summary\">";
  if (report.regions_over_tolerance == 0) {
    out << compared << (compared == 1 ? " region" : " regions") << " checked, all within tolerance.";
  } else {
    out << report.regions_over_tolerance << " of " << compared << " checked regions over tolerance.";
  }
  out << "</p>\n<table>\n<tr><th>Region</th><th>Backend</th><th>Nodes</th><th>First node</th><th>Precision</th>"
      << "<th>Output</th><th>Type</th><th>Max abs error</th><th>Relative error</th><th>Cosine</th><th>Mismatches</th>"
      << "<th>Allowed</th></tr>\n";
  for (const CheckedRegion& region : report.regions) {
    const std::string cells = "<td class=\"n\">" + std::to_string(region.index) + "</td><td>" + html_escape(region.backend) +
                              "</td><td class=\"n\">" + std::to_string(region.node_count) + "</td><td>" +
                              html_escape(region.first_node) + "</td><td>" + html_escape(region.precision) + "</td>";
    std::string allowed = "relative " + number(region.tolerance);
    if (region.min_cosine > 0) allowed += ", cosine &ge; " + number(region.min_cosine, "%.4g");
    if (!region.compared) {
      out << "<tr class=\"reference\">" << cells << "<td colspan=\"7\">"
          << (region.note.empty() ? std::string("the reference itself") : "not checked: " + html_escape(region.note))
          << "</td></tr>\n";
      continue;
    }
    for (const CheckedOutput& output : region.outputs) {
      out << "<tr class=\"" << (output.within_tolerance ? "ok" : "over") << "\">" << cells << "<td>"
          << html_escape(output.name) << "</td><td>" << html_escape(output.type) << "</td>";
      if (output.floating) {
        out << "<td class=\"n\">" << number(output.max_abs_error) << "</td><td class=\"n\">" << number(output.relative_error)
            << "</td><td class=\"n\">" << number(output.cosine, "%.6f") << "</td>";
      } else {
        out << "<td colspan=\"3\">exact comparison</td>";
      }
      out << "<td class=\"n\">" << output.mismatches << "</td><td>" << allowed << "</td></tr>\n";
    }
  }
  out << "</table>\n</body></html>\n";
  return out.str();
}

std::string render_check_json(const CheckReport& report) {
  using report_detail::json_string;
  std::ostringstream out;
  out << "{\n  \"model\": " << json_string(report.model) << ",\n  \"reference\": " << json_string(report.reference)
      << ",\n  \"regions_over_tolerance\": " << report.regions_over_tolerance << ",\n  \"regions\": [";
  for (size_t r = 0; r < report.regions.size(); ++r) {
    const CheckedRegion& region = report.regions[r];
    out << (r ? ",\n" : "\n") << "    {\"index\": " << region.index << ", \"backend\": " << json_string(region.backend)
        << ", \"nodes\": " << region.node_count << ", \"first_node\": " << json_string(region.first_node)
        << ", \"precision\": " << json_string(region.precision) << ", \"compared\": " << (region.compared ? "true" : "false")
        << ", \"note\": " << json_string(region.note)
        << ", \"tolerance\": " << json_number(region.tolerance) << ", \"min_cosine\": " << json_number(region.min_cosine)
        << ", \"within_tolerance\": " << (region.within_tolerance ? "true" : "false") << ",\n     \"outputs\": [";
    for (size_t o = 0; o < region.outputs.size(); ++o) {
      const CheckedOutput& output = region.outputs[o];
      out << (o ? ", " : "") << "{\"name\": " << json_string(output.name) << ", \"type\": " << json_string(output.type)
          << ", \"elements\": " << output.elements << ", \"floating\": " << (output.floating ? "true" : "false")
          << ", \"max_abs_error\": " << json_number(output.max_abs_error)
          << ", \"max_reference\": " << json_number(output.max_reference)
          << ", \"relative_error\": " << json_number(output.relative_error)
          << ", \"cosine\": " << json_number(output.cosine) << ", \"mismatches\": " << output.mismatches
          << ", \"within_tolerance\": " << (output.within_tolerance ? "true" : "false") << "}";
    }
    out << "]}";
  }
  out << (report.regions.empty() ? "]\n}\n" : "\n  ]\n}\n");
  return out.str();
}

}  // namespace tessera
