// Layered layout of a placement report's graph for the HTML page: a
// simplified Sugiyama drawing. Layers are longest paths from the inputs
// (Kahn's algorithm, linear), each layer is ordered by a few barycenter
// sweeps (sorts, so O(N log N)), and boxes are centred on a fixed grid.
// Long edges get no dummy nodes: they are drawn as curves, which keeps the
// layout linear in size for 10,000-node models at the cost of some overlaps.
#include <algorithm>
#include <numeric>

#include "report/report_internal.h"

namespace tessera::report_detail {
namespace {

constexpr double kColumnPitch = kBoxWidth + 24;
constexpr double kRowPitch = kBoxHeight + 44;
constexpr double kMargin = 20;
constexpr int kSweeps = 2;

using Kind = LayoutItem::Kind;

// Items and edges, without positions yet.
GraphLayout collect_items(const PlacementReport& report) {
  GraphLayout layout;
  std::vector<int64_t> item_of_node(report.nodes.size(), -1);
  std::vector<int64_t> item_of_input(report.values.size(), -1);
  for (size_t index = 0; index < report.values.size(); ++index) {
    const ReportValue& value = report.values[index];
    if (value.graph_input && !value.constant && value.producer < 0) {
      item_of_input[index] = static_cast<int64_t>(layout.items.size());
      layout.items.push_back(LayoutItem{Kind::kGraphInput, static_cast<int64_t>(index)});
    }
  }
  for (size_t index = 0; index < report.nodes.size(); ++index) {
    if (report.nodes[index].backend == kFoldedBackend) continue;
    item_of_node[index] = static_cast<int64_t>(layout.items.size());
    layout.items.push_back(LayoutItem{Kind::kNode, static_cast<int64_t>(index)});
  }
  // The item that draws a value's producer, or -1 (constants, folded nodes).
  const auto source_item = [&](int64_t value_index) -> int64_t {
    const ReportValue& value = report.values[static_cast<size_t>(value_index)];
    if (value.constant) return -1;
    if (value.producer >= 0) return item_of_node[static_cast<size_t>(value.producer)];
    return item_of_input[static_cast<size_t>(value_index)];
  };
  for (size_t index = 0; index < report.nodes.size(); ++index) {
    if (item_of_node[index] < 0) continue;
    for (int64_t value : report.nodes[index].inputs) {
      const int64_t source = source_item(value);
      if (source >= 0) {
        layout.edges.push_back(LayoutEdge{static_cast<size_t>(source), static_cast<size_t>(item_of_node[index]), value});
      }
    }
  }
  for (size_t index = 0; index < report.values.size(); ++index) {
    if (!report.values[index].graph_output) continue;
    const size_t item = layout.items.size();
    layout.items.push_back(LayoutItem{Kind::kGraphOutput, static_cast<int64_t>(index)});
    const int64_t source = source_item(static_cast<int64_t>(index));
    if (source >= 0) layout.edges.push_back(LayoutEdge{static_cast<size_t>(source), item, static_cast<int64_t>(index)});
  }
  return layout;
}

// Adjacency in compressed rows: neighbours of item i are
// targets[offsets[i] .. offsets[i + 1]).
struct Adjacency {
  std::vector<size_t> offsets, targets;
};

Adjacency build_adjacency(size_t item_count, const std::vector<LayoutEdge>& edges, bool forward) {
  Adjacency adjacency;
  adjacency.offsets.assign(item_count + 1, 0);
  for (const LayoutEdge& edge : edges) ++adjacency.offsets[(forward ? edge.from : edge.to) + 1];
  std::partial_sum(adjacency.offsets.begin(), adjacency.offsets.end(), adjacency.offsets.begin());
  adjacency.targets.resize(edges.size());
  std::vector<size_t> next(adjacency.offsets.begin(), adjacency.offsets.end() - 1);
  for (const LayoutEdge& edge : edges) {
    adjacency.targets[next[forward ? edge.from : edge.to]++] = forward ? edge.to : edge.from;
  }
  return adjacency;
}

// Longest path from the sources; returns the items in topological order.
std::vector<size_t> assign_layers(GraphLayout& layout, const Adjacency& successors, const Adjacency& predecessors) {
  const size_t count = layout.items.size();
  std::vector<size_t> remaining(count);
  std::vector<size_t> order;
  order.reserve(count);
  for (size_t item = 0; item < count; ++item) {
    remaining[item] = predecessors.offsets[item + 1] - predecessors.offsets[item];
    if (remaining[item] == 0) order.push_back(item);
  }
  for (size_t head = 0; head < order.size(); ++head) {
    const size_t item = order[head];
    for (size_t edge = successors.offsets[item]; edge < successors.offsets[item + 1]; ++edge) {
      const size_t target = successors.targets[edge];
      layout.items[target].layer = std::max(layout.items[target].layer, layout.items[item].layer + 1);
      if (--remaining[target] == 0) order.push_back(target);
    }
  }
  // A cycle (a broken report) leaves items unvisited: put them below the rest
  // rather than refuse to draw the page.
  if (order.size() < count) {
    int64_t deepest = 0;
    for (size_t item : order) deepest = std::max(deepest, layout.items[item].layer);
    for (size_t item = 0; item < count; ++item) {
      if (remaining[item] > 0) {
        layout.items[item].layer = deepest + 1;
        order.push_back(item);
      }
    }
  }
  return order;
}

// One barycenter pass over every layer: each item moves to the mean centred
// position of its neighbours in the direction given (items without any keep
// their place), then the layer is re-sorted.
void barycenter_sweep(std::vector<std::vector<size_t>>& layers, std::vector<double>& centred_position,
                      const Adjacency& neighbours, bool downward) {
  const size_t layer_count = layers.size();
  std::vector<std::pair<double, size_t>> keyed;
  for (size_t step = 0; step < layer_count; ++step) {
    std::vector<size_t>& layer = layers[downward ? step : layer_count - 1 - step];
    keyed.clear();
    for (size_t item : layer) {
      double sum = 0;
      size_t used = 0;
      for (size_t edge = neighbours.offsets[item]; edge < neighbours.offsets[item + 1]; ++edge) {
        sum += centred_position[neighbours.targets[edge]];
        ++used;
      }
      keyed.emplace_back(used ? sum / static_cast<double>(used) : centred_position[item], item);
    }
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& left, const auto& right) { return left.first < right.first; });
    const double centre = (static_cast<double>(layer.size()) - 1) / 2;
    for (size_t position = 0; position < layer.size(); ++position) {
      layer[position] = keyed[position].second;
      centred_position[layer[position]] = static_cast<double>(position) - centre;
    }
  }
}

}  // namespace

GraphLayout layout_report_graph(const PlacementReport& report) {
  GraphLayout layout = collect_items(report);
  const size_t count = layout.items.size();
  const Adjacency successors = build_adjacency(count, layout.edges, true);
  const Adjacency predecessors = build_adjacency(count, layout.edges, false);
  const std::vector<size_t> order = assign_layers(layout, successors, predecessors);

  int64_t deepest = -1;
  for (const LayoutItem& item : layout.items) deepest = std::max(deepest, item.layer);
  std::vector<std::vector<size_t>> layers(static_cast<size_t>(deepest + 1));
  // Topological order as the first guess keeps chains that start together near each other.
  for (size_t item : order) layers[static_cast<size_t>(layout.items[item].layer)].push_back(item);
  std::vector<double> centred_position(count, 0);
  for (const auto& layer : layers) {
    const double centre = (static_cast<double>(layer.size()) - 1) / 2;
    for (size_t position = 0; position < layer.size(); ++position) {
      centred_position[layer[position]] = static_cast<double>(position) - centre;
    }
  }
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    barycenter_sweep(layers, centred_position, predecessors, true);
    barycenter_sweep(layers, centred_position, successors, false);
  }

  double widest = 0;
  for (const auto& layer : layers) widest = std::max(widest, static_cast<double>(layer.size()));
  const double half_width = (widest - 1) / 2 * kColumnPitch;
  for (LayoutItem& item : layout.items) {
    item.x = kMargin + half_width + centred_position[static_cast<size_t>(&item - layout.items.data())] * kColumnPitch;
    item.y = kMargin + static_cast<double>(item.layer) * kRowPitch;
  }
  // Half a box more on the right: the HTML page bows edges that skip layers out to the right.
  layout.width = 2 * kMargin + std::max(0.0, widest - 1) * kColumnPitch + kBoxWidth * 1.5;
  layout.height = 2 * kMargin + std::max<double>(0, static_cast<double>(layers.size()) - 1) * kRowPitch + kBoxHeight;
  return layout;
}

}  // namespace tessera::report_detail
