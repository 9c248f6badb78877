// Shared pieces of the placement report renderers: index checks, the backend
// palette, escaping for JSON / HTML / DOT, number formatting, and the refusal
// and per-backend summaries that both the table and the HTML page show.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/utf8.h"
#include "report/report_internal.h"

namespace tessera::report_detail {
namespace {

// Light fills that stay distinguishable next to each other and keep black
// text readable; the border list is the same hues, darker.
constexpr const char* kPaletteFill[] = {"#8ecae6", "#ffc46b", "#a7d676", "#f4a3a8",
                                        "#cdb4f0", "#7fd8cf", "#f7d774", "#c9b79c"};
constexpr const char* kPaletteBorder[] = {"#1d6a8c", "#b26b00", "#4a7d1c", "#b0303b",
                                          "#6a45a8", "#17796f", "#9a7d00", "#6e5a3a"};
constexpr size_t kPaletteSize = sizeof(kPaletteFill) / sizeof(kPaletteFill[0]);
constexpr const char* kFoldedFill = "#e4e4e4";
constexpr const char* kFoldedBorder = "#8a8a8a";
constexpr const char* kUnknownFill = "#ffffff";
constexpr const char* kUnknownBorder = "#333333";

// -1 for "folded", -2 for a backend the report does not list.
int64_t palette_slot(const PlacementReport& report, std::string_view backend) {
  if (backend == kFoldedBackend) return -1;
  for (size_t index = 0; index < report.backends.size(); ++index) {
    if (report.backends[index] == backend) return static_cast<int64_t>(index);
  }
  return -2;
}

void check_index(int64_t index, size_t limit, const char* what, const std::string& owner) {
  if (index < 0 || static_cast<size_t>(index) >= limit) {
    throw_internal_error("placement report: ", owner, " refers to ", what, " ", index, ", but the report has ",
                         limit, " ", what, "s");
  }
}

std::string format_double(const char* format, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, value);
  return buffer;
}

}  // namespace

void check_report(const PlacementReport& report) {
  std::unordered_set<std::string> backend_names;
  for (const std::string& backend : report.backends) {
    if (!backend_names.insert(backend).second) {
      throw_internal_error("placement report: backend '", backend, "' is listed twice");
    }
  }
  for (size_t index = 0; index < report.nodes.size(); ++index) {
    const ReportNode& node = report.nodes[index];
    const std::string owner = str_cat("node '", node.name, "' (index ", index, ")");
    if (node.region != -1) check_index(node.region, report.regions.size(), "region", owner);
    for (int64_t value : node.inputs) check_index(value, report.values.size(), "value", owner);
    for (int64_t value : node.outputs) check_index(value, report.values.size(), "value", owner);
    if (!node.refusals.empty() && node.refusals.size() != report.backends.size()) {
      throw_internal_error("placement report: ", owner, " has ", node.refusals.size(),
                           " refusal entries for ", report.backends.size(), " backends");
    }
  }
  for (size_t index = 0; index < report.regions.size(); ++index) {
    const ReportRegion& region = report.regions[index];
    const std::string owner = str_cat("region ", index);
    for (int64_t node : region.nodes) check_index(node, report.nodes.size(), "node", owner);
    for (int64_t value : region.inputs) check_index(value, report.values.size(), "value", owner);
    for (int64_t value : region.outputs) check_index(value, report.values.size(), "value", owner);
  }
  for (size_t index = 0; index < report.values.size(); ++index) {
    const ReportValue& value = report.values[index];
    if (value.producer != -1) {
      check_index(value.producer, report.nodes.size(), "node", str_cat("value '", value.name, "'"));
    }
  }
}

std::string backend_colour(const PlacementReport& report, std::string_view backend) {
  const int64_t slot = palette_slot(report, backend);
  if (slot == -1) return kFoldedFill;
  if (slot == -2) return kUnknownFill;
  return kPaletteFill[static_cast<size_t>(slot) % kPaletteSize];
}

std::string backend_border_colour(const PlacementReport& report, std::string_view backend) {
  const int64_t slot = palette_slot(report, backend);
  if (slot == -1) return kFoldedBorder;
  if (slot == -2) return kUnknownBorder;
  return kPaletteBorder[static_cast<size_t>(slot) % kPaletteSize];
}

std::string valid_utf8(std::string_view text) {
  std::string result;
  result.reserve(text.size());
  for (size_t position = 0; position < text.size();) {
    const size_t start = position;
    uint32_t code_point = 0;
    if (next_code_point(text, position, code_point)) {
      result.append(text.substr(start, position - start));
    } else {
      result += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      ++position;
    }
  }
  return result;
}

std::string printable(std::string_view text) {
  std::string result = valid_utf8(text);
  for (char& character : result) {
    if (static_cast<unsigned char>(character) < 0x20 || character == 0x7F) character = ' ';
  }
  return result;
}

std::string json_string(std::string_view text, bool for_html_script) {
  const std::string clean = valid_utf8(text);
  std::string result;
  result.reserve(clean.size() + 2);
  result += '"';
  for (size_t position = 0; position < clean.size(); ++position) {
    const unsigned char character = static_cast<unsigned char>(clean[position]);
    switch (character) {
      case '"': result += "\\\""; continue;
      case '\\': result += "\\\\"; continue;
      case '\n': result += "\\n"; continue;
      case '\r': result += "\\r"; continue;
      case '\t': result += "\\t"; continue;
      case '\b': result += "\\b"; continue;
      case '\f': result += "\\f"; continue;
      default: break;
    }
    const bool html_special = character == '<' || character == '>' || character == '&';
    if (character < 0x20 || (for_html_script && html_special)) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\u%04x", character);
      result += buffer;
      continue;
    }
    // U+2028 and U+2029 (E2 80 A8/A9) end a line in older JavaScript.
    if (for_html_script && character == 0xE2 && position + 2 < clean.size() &&
        static_cast<unsigned char>(clean[position + 1]) == 0x80 &&
        (static_cast<unsigned char>(clean[position + 2]) & 0xFE) == 0xA8) {
      result += static_cast<unsigned char>(clean[position + 2]) == 0xA8 ? "\\u2028" : "\\u2029";
      position += 2;
      continue;
    }
    result += static_cast<char>(character);
  }
  result += '"';
  return result;
}

std::string json_milliseconds(double milliseconds) {
  if (!std::isfinite(milliseconds) || milliseconds < 0) return "null";
  return format_double("%.6g", milliseconds);
}

std::string html_escape(std::string_view text) {
  const std::string clean = valid_utf8(text);
  std::string result;
  result.reserve(clean.size());
  for (char character : clean) {
    switch (character) {
      case '&': result += "&amp;"; break;
      case '<': result += "&lt;"; break;
      case '>': result += "&gt;"; break;
      case '"': result += "&quot;"; break;
      case '\'': result += "&#39;"; break;
      case '\t':
      case '\n': result += character; break;
      default:
        // Other control characters are parse errors in HTML and invalid in SVG's XML.
        if (static_cast<unsigned char>(character) < 0x20 || character == 0x7F) {
          result += "\xEF\xBF\xBD";
        } else {
          result += character;
        }
    }
  }
  return result;
}

std::string dot_escape(std::string_view text) {
  const std::string clean = valid_utf8(text);
  std::string result;
  result.reserve(clean.size());
  for (char character : clean) {
    switch (character) {
      case '"': result += "\\\""; break;
      case '\\': result += "\\\\"; break;
      case '\n': result += "\\n"; break;
      case '\r': break;
      default:
        if (static_cast<unsigned char>(character) < 0x20 || character == 0x7F) {
          result += ' ';
        } else {
          result += character;
        }
    }
  }
  return result;
}

std::string shorten(std::string_view text, size_t max_characters) {
  const std::string clean = printable(text);
  std::vector<size_t> starts;  // byte offset of each code point
  for (size_t position = 0; position < clean.size(); ++position) {
    if ((static_cast<unsigned char>(clean[position]) & 0xC0) != 0x80) starts.push_back(position);
  }
  if (starts.size() <= max_characters) return clean;
  if (max_characters == 0) return "";
  return clean.substr(0, starts[max_characters - 1]) + "\xE2\x80\xA6";  // U+2026 HORIZONTAL ELLIPSIS
}

std::string format_milliseconds(double milliseconds) {
  if (!std::isfinite(milliseconds) || milliseconds < 0) return "";
  if (milliseconds < 1) return format_double("%.3f ms", milliseconds);
  if (milliseconds < 100) return format_double("%.2f ms", milliseconds);
  return format_double("%.1f ms", milliseconds);
}

std::string format_bytes(int64_t bytes) {
  if (bytes < 1024) return str_cat(bytes, " B");
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double scaled = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (scaled >= 1024 && unit + 1 < sizeof(units) / sizeof(units[0])) {
    scaled /= 1024;
    ++unit;
  }
  return format_double("%.2f ", scaled) + units[unit];
}

std::vector<std::vector<RefusalGroup>> group_refusals(const PlacementReport& report) {
  std::vector<std::vector<RefusalGroup>> groups_per_backend(report.backends.size());
  for (size_t backend = 0; backend < report.backends.size(); ++backend) {
    std::vector<RefusalGroup>& groups = groups_per_backend[backend];
    std::unordered_map<std::string, size_t> group_of_key;
    for (size_t index = 0; index < report.nodes.size(); ++index) {
      const ReportNode& node = report.nodes[index];
      // Folded nodes never run, so what a backend thinks of them does not matter.
      if (node.backend == kFoldedBackend || node.refusals.empty() || node.refusals[backend].empty()) continue;
      // A node the backend refuses alone but runs all the same, inside one of its patterns.
      if (node.backend == report.backends[backend]) continue;
      std::string key = node.op_type;
      key += '\0';
      key += node.refusals[backend];
      auto [entry, inserted] = group_of_key.emplace(std::move(key), groups.size());
      if (inserted) groups.push_back(RefusalGroup{node.op_type, node.refusals[backend], {}});
      groups[entry->second].nodes.push_back(static_cast<int64_t>(index));
    }
    std::stable_sort(groups.begin(), groups.end(), [](const RefusalGroup& left, const RefusalGroup& right) {
      return left.nodes.size() > right.nodes.size();
    });
  }
  return groups_per_backend;
}

std::vector<BackendTotals> backend_totals(const PlacementReport& report) {
  std::vector<BackendTotals> totals;
  std::unordered_map<std::string, size_t> slot_of_backend;
  const auto slot = [&](const std::string& backend) -> BackendTotals& {
    auto [entry, inserted] = slot_of_backend.emplace(backend, totals.size());
    if (inserted) totals.push_back(BackendTotals{backend});
    return totals[entry->second];
  };
  for (const std::string& backend : report.backends) slot(backend);
  for (const ReportNode& node : report.nodes) ++slot(node.backend).nodes;
  for (const ReportRegion& region : report.regions) {
    BackendTotals& entry = slot(region.backend);
    ++entry.regions;
    if (region.milliseconds >= 0) entry.milliseconds = std::max(entry.milliseconds, 0.0) + region.milliseconds;
  }
  // Without region times, fall back to the sum of the profiled node times.
  std::vector<bool> has_region_time(totals.size());
  for (size_t index = 0; index < totals.size(); ++index) has_region_time[index] = totals[index].milliseconds >= 0;
  for (const ReportNode& node : report.nodes) {
    const size_t index = slot_of_backend.at(node.backend);
    if (node.milliseconds >= 0 && !has_region_time[index]) {
      totals[index].milliseconds = std::max(totals[index].milliseconds, 0.0) + node.milliseconds;
    }
  }
  return totals;
}

int64_t constant_input_count(const PlacementReport& report, const ReportNode& node) {
  int64_t count = 0;
  for (int64_t value_index : node.inputs) {
    const ReportValue& value = report.values[static_cast<size_t>(value_index)];
    const bool from_folded =
        value.producer >= 0 && report.nodes[static_cast<size_t>(value.producer)].backend == kFoldedBackend;
    if (value.constant || from_folded) ++count;
  }
  return count;
}

}  // namespace tessera::report_detail
