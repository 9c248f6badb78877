#include "runtime/memory_plan.h"

#include <algorithm>

namespace tessera {

namespace {
constexpr int64_t kAlignment = 64;
int64_t align_up(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

struct Interval {
  ValueId id;
  int64_t size;
  int64_t first;
  int64_t last;
};
}  // namespace

MemoryPlan plan_memory(const Graph& graph) {
  std::vector<int64_t> steps(graph.nodes.size());
  for (size_t k = 0; k < steps.size(); ++k) steps[k] = static_cast<int64_t>(k);
  return plan_memory(graph, std::vector<char>(graph.values.size(), 1), steps);
}

MemoryPlan plan_memory(const Graph& graph, const std::vector<char>& in_host_memory, const std::vector<int64_t>& node_step,
                       const std::vector<int64_t>& live_until) {
  MemoryPlan plan;
  const size_t n = graph.values.size();
  plan.offsets.assign(n, MemoryPlan::kNotPlanned);
  std::vector<char> excluded(n, 0);
  for (ValueId id : graph.inputs) excluded[static_cast<size_t>(id)] = 1;
  for (ValueId id : graph.outputs) excluded[static_cast<size_t>(id)] = 1;
  std::vector<int64_t> first(n, -1), last(n, -1);
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    const Node& node = graph.nodes[k];
    const int64_t step = node_step[k];
    for (ValueId id : node.outputs) {
      if (id != kNoValue && first[static_cast<size_t>(id)] < 0) first[static_cast<size_t>(id)] = step;
      if (id != kNoValue) last[static_cast<size_t>(id)] = std::max<int64_t>(last[static_cast<size_t>(id)], step);
    }
    for (ValueId id : node.inputs) {
      if (id != kNoValue) last[static_cast<size_t>(id)] = std::max<int64_t>(last[static_cast<size_t>(id)], step);
    }
  }
  for (size_t i = 0; i < live_until.size() && i < n; ++i) {
    if (first[i] >= 0) last[i] = std::max(last[i], live_until[i]);
  }
  std::vector<Interval> intervals;
  for (size_t i = 0; i < n; ++i) {
    const Value& v = graph.values[i];
    // String tensors hold std::string objects, which only Tensor constructs: never in the arena.
    if (excluded[i] || !in_host_memory[i] || v.constant || first[i] < 0 || !v.type.is_static() ||
        v.type.dtype == DType::kString) {
      continue;
    }
    int64_t size = align_up(std::max<int64_t>(1, shape_numel(v.type.dims) * static_cast<int64_t>(dtype_size(v.type.dtype))));
    intervals.push_back({static_cast<ValueId>(i), size, first[i], last[i]});
    plan.unplanned_bytes += size;
  }
  // Largest first, each at the lowest offset that does not collide with an
  // already placed value whose lifetime overlaps.
  std::sort(intervals.begin(), intervals.end(), [](const Interval& a, const Interval& b) {
    return a.size != b.size ? a.size > b.size : a.id < b.id;
  });
  struct Placed {
    int64_t offset, size, first, last;
  };
  std::vector<Placed> placed;
  for (const Interval& iv : intervals) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed& p : placed) {
      if (p.first <= iv.last && iv.first <= p.last) busy.emplace_back(p.offset, p.offset + p.size);
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + iv.size <= begin) break;
      offset = std::max(offset, end);
    }
    placed.push_back({offset, iv.size, iv.first, iv.last});
    plan.offsets[static_cast<size_t>(iv.id)] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + iv.size);
  }
  return plan;
}

}  // namespace tessera
