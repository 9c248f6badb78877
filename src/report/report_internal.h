// Helpers shared by the placement report renderers (table, JSON, DOT, HTML):
// checking a report's indices once, the backend colour palette, escaping
// for each output language, and the summaries several renderers print
// (refusals grouped by reason, totals per backend). Internal to src/report.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "report/placement_report.h"

namespace tessera::report_detail {

/// The backend name of nodes computed at compile time.
inline constexpr std::string_view kFoldedBackend = "folded";

/// Throws an internal error naming the first out-of-range index, unequal
/// refusal list or duplicate backend: every renderer can then index freely.
void check_report(const PlacementReport& report);

/// A fixed colour per backend, the same in DOT and HTML: the backend's
/// position in report.backends picks from a palette; "folded" is grey and a
/// backend missing from the list gets a neutral colour.
std::string backend_colour(const PlacementReport& report, std::string_view backend);
/// A darker shade of backend_colour for outlines and text on light fills.
std::string backend_border_colour(const PlacementReport& report, std::string_view backend);

/// Replaces bytes that are not valid UTF-8 with U+FFFD, so every renderer
/// emits valid UTF-8 whatever the names contain.
std::string valid_utf8(std::string_view text);
/// valid_utf8 with control characters (newlines included) turned into
/// spaces: for names shown on one line of text.
std::string printable(std::string_view text);

/// A JSON string literal with its quotes: quotes, backslashes and control
/// characters escaped, non-ASCII passed through as (valid) UTF-8. With
/// for_html_script, '<', '>', '&', U+2028 and U+2029 are escaped as well so
/// the literal can sit inside an HTML <script> element.
std::string json_string(std::string_view text, bool for_html_script = false);
/// A number for JSON: integers exactly; -1 or non-finite milliseconds as null.
std::string json_milliseconds(double milliseconds);

/// Text for HTML content and attribute values (& < > " ' escaped, control
/// characters other than tab and newline replaced).
std::string html_escape(std::string_view text);
/// Text for a quoted Graphviz string (quotes and backslashes escaped,
/// newlines as DOT's \n line break).
std::string dot_escape(std::string_view text);

/// At most max_characters code points of printable(text), ending in "…"
/// when cut.
std::string shorten(std::string_view text, size_t max_characters);
/// "12.3 ms" with a precision that suits the magnitude.
std::string format_milliseconds(double milliseconds);
/// "1.50 MiB" etc.
std::string format_bytes(int64_t bytes);

/// Nodes one backend refused with the same op type and reason.
struct RefusalGroup {
  std::string op_type;
  std::string reason;
  std::vector<int64_t> nodes;  // indices into PlacementReport::nodes
};
/// Per backend (report.backends order), its refusals of executed nodes
/// grouped by (op type, reason), the largest group first.
std::vector<std::vector<RefusalGroup>> group_refusals(const PlacementReport& report);

/// Counts per backend for the totals and the legend.
struct BackendTotals {
  std::string backend;
  int64_t nodes = 0;
  int64_t regions = 0;
  double milliseconds = -1;  // sum over profiled regions, -1 when none
};
/// One entry per backend in report.backends, then any other backend a node
/// or region names (e.g. "folded"), in first-seen order.
std::vector<BackendTotals> backend_totals(const PlacementReport& report);

/// Inputs of a node that are constants or outputs of folded nodes: they are
/// not drawn, only counted.
int64_t constant_input_count(const PlacementReport& report, const ReportNode& node);

}  // namespace tessera::report_detail

namespace tessera::report_detail {

/// What the HTML page draws: executed operator nodes, graph inputs and graph
/// outputs (constants and folded nodes are only counted).
struct LayoutItem {
  enum class Kind { kNode, kGraphInput, kGraphOutput };
  Kind kind = Kind::kNode;
  int64_t index = -1;  // node index for kNode, value index otherwise
  int64_t layer = 0;   // longest path from the inputs
  double x = 0, y = 0; // top-left corner of the box
};

struct LayoutEdge {
  size_t from = 0, to = 0;  // indices into GraphLayout::items
  int64_t value = -1;       // the value it carries (index into report values)
};

struct GraphLayout {
  std::vector<LayoutItem> items;
  std::vector<LayoutEdge> edges;
  double width = 0, height = 0;  // of the whole drawing, margins included
};

inline constexpr double kBoxWidth = 160;
inline constexpr double kBoxHeight = 40;

/// Lays the graph out in layers (longest path from the inputs), ordering each
/// layer with barycenter sweeps to reduce crossings. O((N + E) log N), so a
/// 10,000-node graph takes milliseconds. Needs: check_report passed.
GraphLayout layout_report_graph(const PlacementReport& report);

}  // namespace tessera::report_detail

namespace tessera::report_detail {

/// The HTML page's inline CSS and script (placement_report_html_assets.cc).
/// The script reads the item data block, wires pan/zoom and the details
/// panel, then sets body data-rendered="ok" and data-node-count.
extern const char kHtmlStyle[];
extern const char kHtmlScript[];

}  // namespace tessera::report_detail
