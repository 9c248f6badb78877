// The placement report as a text table for `tessera partition`: one row per
// region with its boundary tensors on the lines beneath, then what each
// backend refused (identical reasons grouped), then totals. Everything fits a
// 100-column terminal; long lists end in "... and N more".
#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include "ir/error.h"
#include "report/report_internal.h"

namespace tessera {
namespace {

using report_detail::shorten;

constexpr size_t kLineWidth = 100;
constexpr size_t kMaxGroupsPerBackend = 12;

// Display width in code points (close enough for names; the table never
// depends on East Asian widths being right).
size_t display_width(std::string_view text) {
  size_t width = 0;
  for (char character : text) {
    if ((static_cast<unsigned char>(character) & 0xC0) != 0x80) ++width;
  }
  return width;
}

std::string pad_right(const std::string& text, size_t width) {
  const size_t current = display_width(text);
  return current >= width ? text : text + std::string(width - current, ' ');
}

std::string pad_left(const std::string& text, size_t width) {
  const size_t current = display_width(text);
  return current >= width ? text : std::string(width - current, ' ') + text;
}

/// "prefix item, item, item ... and N more", filling at most kLineWidth columns.
std::string item_line(const std::string& prefix, const std::vector<std::string>& items) {
  std::string line = prefix;
  constexpr size_t kMoreReserve = 18;  // room for " ... and 12345 more"
  size_t shown = 0;
  for (const std::string& item : items) {
    const std::string separator = shown == 0 ? "" : ", ";
    const bool last = shown + 1 == items.size();
    const size_t room = kLineWidth - (last ? 0 : kMoreReserve);
    if (shown > 0 && display_width(line) + display_width(separator) + display_width(item) > room) break;
    line += separator + item;
    ++shown;
  }
  if (shown < items.size()) line += str_cat(" ... and ", items.size() - shown, " more");
  return line;
}

std::string value_summary(const PlacementReport& report, int64_t value_index) {
  const ReportValue& value = report.values[static_cast<size_t>(value_index)];
  return shorten(value.name, 32) + ": " + shorten(value.type, 28);
}

/// prefix + text split at spaces into lines of at most kLineWidth columns;
/// lines after the first start with continuation_indent.
std::string wrap(const std::string& prefix, const std::string& text, const std::string& continuation_indent) {
  std::string result;
  std::string line = prefix;
  bool line_has_words = false;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    if (line_has_words && display_width(line) + 1 + display_width(word) > kLineWidth) {
      result += line + "\n";
      line = continuation_indent;
      line_has_words = false;
    }
    if (line_has_words) line += ' ';
    line += word;
    line_has_words = true;
  }
  return result + line;
}

std::string quoted_names(const PlacementReport& report, const std::vector<int64_t>& nodes, size_t limit) {
  std::string result;
  for (size_t position = 0; position < nodes.size() && position < limit; ++position) {
    if (position > 0) result += ", ";
    result += str_cat("'", shorten(report.nodes[static_cast<size_t>(nodes[position])].name, 24), "'");
  }
  if (nodes.size() > limit) result += str_cat(" ... and ", nodes.size() - limit, " more");
  return result;
}

void write_regions(const PlacementReport& report, std::ostream& out) {
  if (report.regions.empty()) {
    out << "No regions: nothing runs (the graph's outputs are its inputs or constants).\n";
    return;
  }
  bool profiled = false;
  size_t backend_width = 7, memory_width = 6;
  for (const ReportRegion& region : report.regions) {
    backend_width = std::max(backend_width, display_width(shorten(region.backend, 20)));
    memory_width = std::max(memory_width, display_width(shorten(region.memory_space, 16)));
    profiled = profiled || region.milliseconds >= 0;
  }
  const size_t index_width = std::max<size_t>(6, std::to_string(report.regions.size() - 1).size());
  out << pad_left("Region", index_width) << "  " << pad_right("Backend", backend_width) << "  "
      << pad_right("Memory", memory_width) << "  " << "  Nodes  Inputs  Outputs" << (profiled ? "        Time" : "")
      << "\n";
  const std::string indent(index_width + 2, ' ');
  for (size_t index = 0; index < report.regions.size(); ++index) {
    const ReportRegion& region = report.regions[index];
    out << pad_left(std::to_string(index), index_width) << "  " << pad_right(shorten(region.backend, 20), backend_width)
        << "  " << pad_right(shorten(region.memory_space, 16), memory_width) << "  "
        << pad_left(std::to_string(region.nodes.size()), 7) << pad_left(std::to_string(region.inputs.size()), 8)
        << pad_left(std::to_string(region.outputs.size()), 9);
    if (profiled && region.milliseconds >= 0) out << pad_left(report_detail::format_milliseconds(region.milliseconds), 12);
    out << "\n";
    std::vector<std::string> items;
    for (int64_t value : region.inputs) items.push_back(value_summary(report, value));
    if (!items.empty()) out << item_line(indent + "in:    ", items) << "\n";
    items.clear();
    for (int64_t value : region.outputs) items.push_back(value_summary(report, value));
    if (!items.empty()) out << item_line(indent + "out:   ", items) << "\n";
    items.clear();
    for (const std::string& composite : region.composites) items.push_back(shorten(composite, 60));
    if (!items.empty()) out << item_line(indent + "fused: ", items) << "\n";
  }
}

void write_refusals(const PlacementReport& report, std::ostream& out) {
  const auto groups_per_backend = report_detail::group_refusals(report);
  for (size_t backend = 0; backend < report.backends.size(); ++backend) {
    const auto& groups = groups_per_backend[backend];
    const std::string name = shorten(report.backends[backend], 40);
    if (groups.empty()) {
      out << "Backend '" << name << "' refused no node.\n";
      continue;
    }
    size_t refused_nodes = 0;
    for (const auto& group : groups) refused_nodes += group.nodes.size();
    out << "Backend '" << name << "' refused " << refused_nodes << (refused_nodes == 1 ? " node:\n" : " nodes:\n");
    for (size_t position = 0; position < groups.size() && position < kMaxGroupsPerBackend; ++position) {
      const auto& group = groups[position];
      std::string line = shorten(group.op_type, 24);
      if (group.nodes.size() == 1) {
        line += str_cat(" ", quoted_names(report, group.nodes, 1));
      } else {
        line += str_cat(" x", group.nodes.size());
      }
      line += ": " + report_detail::printable(group.reason);
      out << wrap("  ", line, "      ") << "\n";
    }
    if (groups.size() > kMaxGroupsPerBackend) {
      size_t hidden_nodes = 0;
      for (size_t position = kMaxGroupsPerBackend; position < groups.size(); ++position) {
        hidden_nodes += groups[position].nodes.size();
      }
      out << "  ... and " << groups.size() - kMaxGroupsPerBackend << " more reasons (" << hidden_nodes
          << (hidden_nodes == 1 ? " node)\n" : " nodes)\n");
    }
  }
}

/// Under --precision bf16: how many nodes compute in each reduced precision
/// (by op type), and each node that stays float32 with the reason. Nothing
/// when the model runs in its own types only.
void write_precision(const PlacementReport& report, std::ostream& out) {
  std::map<std::string, std::map<std::string, size_t>> reduced;  // precision -> op type -> count
  std::vector<const ReportNode*> kept;
  for (const ReportNode& node : report.nodes) {
    if (!node.precision.empty()) ++reduced[node.precision][node.op_type];
    if (!node.precision_note.empty()) kept.push_back(&node);
  }
  if (reduced.empty() && kept.empty()) return;
  out << "Precision:\n";
  for (const auto& [precision, ops] : reduced) {
    size_t total = 0;
    std::string by_op;
    for (const auto& [op, count] : ops) {
      total += count;
      by_op += (by_op.empty() ? "" : ", ") + op + " " + std::to_string(count);
    }
    out << wrap("  ", std::to_string(total) + (total == 1 ? " node computes" : " nodes compute") + " in " + precision +
                          " with float32 accumulation (" + by_op + ")",
                "      ")
        << "\n";
  }
  const size_t shown = std::min<size_t>(kept.size(), 20);
  for (size_t i = 0; i < shown; ++i) {
    out << wrap("  ", "float32: '" + report_detail::printable(kept[i]->name) + "' (" + kept[i]->op_type +
                          "): " + report_detail::printable(kept[i]->precision_note),
                "      ")
        << "\n";
  }
  if (kept.size() > shown) out << "  ... and " << kept.size() - shown << " more nodes kept in float32\n";
  out << "\n";
}

void write_totals(const PlacementReport& report, std::ostream& out) {
  const auto totals = report_detail::backend_totals(report);
  size_t backend_width = 7;
  bool profiled = false;
  for (const auto& entry : totals) {
    backend_width = std::max(backend_width, display_width(shorten(entry.backend, 20)));
    profiled = profiled || entry.milliseconds >= 0;
  }
  out << "Totals:\n  " << pad_right("Backend", backend_width) << "   Nodes  Regions" << (profiled ? "        Time" : "")
      << "\n";
  for (const auto& entry : totals) {
    out << "  " << pad_right(shorten(entry.backend, 20), backend_width) << pad_left(std::to_string(entry.nodes), 8)
        << pad_left(std::to_string(entry.regions), 9);
    if (profiled && entry.milliseconds >= 0) out << pad_left(report_detail::format_milliseconds(entry.milliseconds), 12);
    out << "\n";
  }
  out << "  Copies between memory spaces: " << report.copies_per_run << " per run, "
      << report_detail::format_bytes(report.copy_bytes_per_run) << " (" << report.copy_bytes_per_run
      << " bytes)\n";
}

}  // namespace

/// The candidates `tessera tune` measured, when the placement came from its record.
void write_tuning(const PlacementReport& report, std::ostream& out) {
  const ReportTuning& t = report.tuning;
  if (!t.present) return;
  out << "\nTuned placement '" << report_detail::printable(t.chosen) << "': " << report_detail::format_milliseconds(t.tuned_milliseconds)
      << " against " << report_detail::format_milliseconds(t.default_milliseconds) << " by default and "
      << report_detail::format_milliseconds(t.best_single_milliseconds) << " for the best single backend ('"
      << report_detail::printable(t.best_single) << "'); " << t.threads << (t.threads == 1 ? " thread, " : " threads, ")
      << report_detail::printable(t.cpu) << ".\nCandidates measured (* the fastest so far):\n";
  for (const ReportTuningCandidate& c : t.candidates) {
    const std::string time = c.milliseconds >= 0 ? report_detail::format_milliseconds(c.milliseconds) : std::string("failed");
    std::string line = pad_left(time, 12) + (c.accepted ? " * " : "   ") + report_detail::printable(c.name);
    if (!c.error.empty()) line += ": " + report_detail::printable(c.error);
    out << wrap("", line, "                ") << "\n";
  }
}

/// The nodes inside compiled control-flow bodies, per node that holds them: per backend, how many and
/// which (by path below the node).
void write_inner(const PlacementReport& report, std::ostream& out) {
  bool any = false;
  for (const ReportNode& node : report.nodes) {
    if (node.inner.empty()) continue;
    if (!any) out << "Nodes inside control flow (compiled bodies):\n";
    any = true;
    std::vector<std::string> order;
    std::map<std::string, std::vector<std::string>> by_backend;
    for (const ReportInnerNode& inner : node.inner) {
      if (!by_backend.count(inner.backend)) order.push_back(inner.backend);
      by_backend[inner.backend].push_back(report_detail::printable(inner.path));
    }
    out << "  " << report_detail::printable(node.name) << " (" << report_detail::printable(node.op_type) << "): "
        << node.inner.size() << (node.inner.size() == 1 ? " node\n" : " nodes\n");
    for (const std::string& backend : order) {
      const std::vector<std::string>& paths = by_backend[backend];
      out << item_line("    " + report_detail::printable(backend) + " (" + std::to_string(paths.size()) + "): ", paths) << "\n";
    }
    // Profiled: the slowest of them (their times are part of the node's).
    std::vector<const ReportInnerNode*> timed;
    for (const ReportInnerNode& inner : node.inner) {
      if (inner.milliseconds > 0) timed.push_back(&inner);
    }
    std::sort(timed.begin(), timed.end(), [](const ReportInnerNode* a, const ReportInnerNode* b) { return a->milliseconds > b->milliseconds; });
    for (size_t k = 0; k < timed.size() && k < 5; ++k) {
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.3f ms", timed[k]->milliseconds);
      out << "    " << ms << "  " << report_detail::printable(timed[k]->path) << " ("
          << report_detail::printable(timed[k]->op_type) << ") on " << report_detail::printable(timed[k]->backend) << "\n";
    }
  }
  if (any) out << "\n";
}

std::string render_report_table(const PlacementReport& report) {
  report_detail::check_report(report);
  std::ostringstream out;
  std::string backends;
  for (const std::string& backend : report.backends) backends += (backends.empty() ? "" : ", ") + backend;
  out << wrap("", "Placement of '" + report_detail::printable(report.model) + "' on backends: " +
                  report_detail::printable(backends),
              "  ")
      << "\n";
  size_t folded = 0;
  for (const ReportNode& node : report.nodes) folded += node.backend == report_detail::kFoldedBackend ? 1 : 0;
  out << report.nodes.size() - folded << " nodes run in " << report.regions.size()
      << (report.regions.size() == 1 ? " region" : " regions") << ", " << folded << " folded at compile time.\n\n";
  write_regions(report, out);
  out << "\n";
  write_inner(report, out);
  write_refusals(report, out);
  out << "\n";
  write_precision(report, out);
  write_totals(report, out);
  write_tuning(report, out);
  return out.str();
}

}  // namespace tessera
