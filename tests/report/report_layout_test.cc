// Tests of the HTML page's layered layout: layers are longest paths from the
// inputs, barycenter sweeps untangle crossings a naive order would draw,
// boxes never overlap, and a cycle (a broken report) still lays out.
#include <gtest/gtest.h>

#include <set>

#include "ir/error.h"
#include "report/report_internal.h"

namespace tessera {
namespace {

using report_detail::GraphLayout;
using report_detail::LayoutItem;

/// A report whose nodes are given as lists of producing node indices (-1:
/// the single graph input); the last node's output is the graph output.
PlacementReport report_from_edges(const std::vector<std::vector<int>>& inputs_of_node) {
  PlacementReport report;
  report.backends = {"native"};
  report.values.push_back(ReportValue{"input", "float32[1]", -1, true});
  for (size_t node = 0; node < inputs_of_node.size(); ++node) {
    report.values.push_back(ReportValue{str_cat("v", node), "float32[1]", static_cast<int64_t>(node)});
  }
  for (size_t node = 0; node < inputs_of_node.size(); ++node) {
    ReportNode entry{str_cat("node", node), "Op", "native", -1};
    for (int producer : inputs_of_node[node]) entry.inputs.push_back(producer + 1);
    entry.outputs = {static_cast<int64_t>(node) + 1};
    report.nodes.push_back(entry);
  }
  report.values.back().graph_output = true;
  return report;
}

const LayoutItem& node_item(const GraphLayout& layout, int64_t node) {
  for (const LayoutItem& item : layout.items) {
    if (item.kind == LayoutItem::Kind::kNode && item.index == node) return item;
  }
  throw std::runtime_error("node not drawn");
}

TEST(ReportLayout, LayersAreLongestPaths) {
  // 0 <- input; 1 <- 0; 2 <- 1; 3 <- 0 and 2 (a shortcut that must not pull 3 up).
  const GraphLayout layout = report_detail::layout_report_graph(report_from_edges({{-1}, {0}, {1}, {0, 2}}));
  EXPECT_EQ(node_item(layout, 0).layer, 1);
  EXPECT_EQ(node_item(layout, 1).layer, 2);
  EXPECT_EQ(node_item(layout, 2).layer, 3);
  EXPECT_EQ(node_item(layout, 3).layer, 4);
  ASSERT_EQ(layout.items.size(), 6u);  // input, 4 nodes, output
  EXPECT_EQ(layout.items.front().kind, LayoutItem::Kind::kGraphInput);
  EXPECT_EQ(layout.items.back().kind, LayoutItem::Kind::kGraphOutput);
  EXPECT_EQ(layout.items.back().layer, 5);
  EXPECT_EQ(layout.edges.size(), 6u);  // input->0, 0->1, 1->2, 0->3, 2->3, 3->output
  for (const auto& edge : layout.edges) EXPECT_LT(layout.items[edge.from].y, layout.items[edge.to].y);
}

TEST(ReportLayout, BarycenterSweepsRemoveCrossings) {
  // Layer 1: a (0), b (1). Layer 2 in node order: child_of_b (2), child_of_a (3):
  // the topological first guess crosses the two edges; a sweep must uncross them.
  const GraphLayout layout = report_detail::layout_report_graph(report_from_edges({{-1}, {-1}, {1}, {0}}));
  const double a = node_item(layout, 0).x, b = node_item(layout, 1).x;
  const double child_of_b = node_item(layout, 2).x, child_of_a = node_item(layout, 3).x;
  ASSERT_NE(a, b);
  EXPECT_EQ(a < b, child_of_a < child_of_b) << "edges a->child_of_a and b->child_of_b cross";
}

TEST(ReportLayout, BoxesDoNotOverlapAndFitTheDrawing) {
  std::vector<std::vector<int>> edges;
  for (int node = 0; node < 200; ++node) {
    // A wide fan-out and fan-in with some skips.
    if (node < 50) edges.push_back({-1});
    else edges.push_back({node % 50, (node * 7) % node});
  }
  const GraphLayout layout = report_detail::layout_report_graph(report_from_edges(edges));
  std::set<std::pair<double, double>> corners;
  for (const LayoutItem& item : layout.items) {
    EXPECT_TRUE(corners.insert({item.x, item.y}).second) << "two boxes at " << item.x << "," << item.y;
    EXPECT_GE(item.x, 0);
    EXPECT_GE(item.y, 0);
    EXPECT_LE(item.x + report_detail::kBoxWidth, layout.width);
    EXPECT_LE(item.y + report_detail::kBoxHeight, layout.height);
  }
  // Same layer, same row; boxes in a row at least a box width apart.
  for (const LayoutItem& first : layout.items) {
    for (const LayoutItem& second : layout.items) {
      if (&first == &second || first.y != second.y) continue;
      EXPECT_GE(std::abs(first.x - second.x), report_detail::kBoxWidth);
    }
  }
}

TEST(ReportLayout, CycleStillLaysOut) {
  // A broken report: 0 and 1 read each other. The page must still draw both.
  const GraphLayout layout = report_detail::layout_report_graph(report_from_edges({{1}, {0}}));
  EXPECT_EQ(layout.items.size(), 4u);
  EXPECT_GT(node_item(layout, 0).layer, 0);
  const std::string html = render_report_html(report_from_edges({{1}, {0}}));
  EXPECT_NE(html.find("data-expected-node-count=\"2\""), std::string::npos);
}

}  // namespace
}  // namespace tessera
