// Extraction of a region into a standalone graph for its backend, and the
// reordering of the global graph into region order (see partitioner.h).
#include <algorithm>
#include <map>

#include "ir/error.h"
#include "partition/partitioner.h"

namespace tessera {
namespace {

/// Maps global value ids to the ids of a graph being built.
class ValueMapper {
 public:
  ValueMapper(const Graph& source, Graph& target, std::vector<ValueId>* global_of_local = nullptr)
      : source_(source), target_(target), global_of_local_(global_of_local) {}

  /// The target's id for `global`, created (with the source's name, type and
  /// shared constant data) on first use.
  ValueId map(ValueId global) {
    if (global == kNoValue) return kNoValue;
    auto it = ids_.find(global);
    if (it != ids_.end()) return it->second;
    const Value& v = source_.value(global);
    target_.values.push_back(Value{v.name, v.type, v.constant});
    const ValueId local = static_cast<ValueId>(target_.values.size() - 1);
    ids_[global] = local;
    if (global_of_local_) global_of_local_->push_back(global);
    return local;
  }
  /// A fresh non-constant value standing for `global` (body inputs for constants).
  ValueId map_as_input(ValueId global) {
    const Value& v = source_.value(global);
    target_.values.push_back(Value{v.name, v.type, nullptr});
    const ValueId local = static_cast<ValueId>(target_.values.size() - 1);
    ids_[global] = local;
    if (global_of_local_) global_of_local_->push_back(global);
    return local;
  }

 private:
  const Graph& source_;
  Graph& target_;
  std::vector<ValueId>* global_of_local_;
  std::map<ValueId, ValueId> ids_;
};

Node remap_node(const Node& node, ValueMapper& mapper) {
  Node copy = node;
  for (ValueId& id : copy.inputs) id = mapper.map(id);
  for (ValueId& id : copy.outputs) id = mapper.map(id);
  return copy;
}

}  // namespace

RegionGraph extract_region(const Graph& graph, const Region& region) {
  RegionGraph result;
  Graph& g = result.graph;
  g.name = graph.name;
  ValueMapper mapper(graph, g, &result.global_value);
  for (ValueId in : region.inputs) g.inputs.push_back(mapper.map(in));

  std::map<size_t, const Composite*> composite_at;  // first member → composite
  for (const Composite& composite : region.composites) composite_at[composite.nodes.front()] = &composite;
  std::vector<char> in_composite(graph.nodes.size(), 0);
  for (const Composite& composite : region.composites) {
    for (size_t node : composite.nodes) in_composite[node] = 1;
  }

  for (size_t node_index : region.nodes) {
    auto it = composite_at.find(node_index);
    if (it == composite_at.end()) {
      if (in_composite[node_index]) continue;  // emitted with its composite
      g.nodes.push_back(remap_node(graph.nodes[node_index], mapper));
      result.global_nodes.push_back({node_index});
      continue;
    }
    const Composite& composite = *it->second;
    const Node& root = graph.nodes[composite.nodes.back()];
    // The composite's inputs: every value its members read that none of them
    // produces, constants included, in order of first reading.
    std::vector<ValueId> produced;
    std::vector<ValueId> external;
    for (size_t member : composite.nodes) {
      for (ValueId in : graph.nodes[member].inputs) {
        if (in == kNoValue) continue;
        if (std::find(produced.begin(), produced.end(), in) != produced.end()) continue;
        if (std::find(external.begin(), external.end(), in) == external.end()) external.push_back(in);
      }
      for (ValueId out : graph.nodes[member].outputs) {
        if (out != kNoValue) produced.push_back(out);
      }
    }
    auto body = std::make_shared<Graph>();
    body->name = composite.pattern;
    ValueMapper body_mapper(graph, *body);
    for (ValueId in : external) body->inputs.push_back(body_mapper.map_as_input(in));
    for (size_t member : composite.nodes) body->nodes.push_back(remap_node(graph.nodes[member], body_mapper));
    for (ValueId out : root.outputs) {
      if (out != kNoValue) body->outputs.push_back(body_mapper.map(out));
    }

    Node node;
    node.name = root.name;
    node.op_type = "Composite";
    node.domain = "tessera";
    node.opset = 1;
    for (ValueId in : external) node.inputs.push_back(mapper.map(in));
    for (ValueId out : root.outputs) node.outputs.push_back(mapper.map(out));
    node.attrs.set("pattern", Attribute::of_string(composite.pattern));
    Attribute body_attr;
    body_attr.kind = Attribute::Kind::kGraph;
    body_attr.graph = std::move(body);
    node.attrs.set("body", std::move(body_attr));
    for (size_t member : composite.nodes) {
      if (member != composite.nodes.back()) node.fused.push_back({graph.nodes[member].name, graph.nodes[member].op_type});
    }
    g.nodes.push_back(std::move(node));
    result.global_nodes.push_back(composite.nodes);
  }
  for (ValueId out : region.outputs) g.outputs.push_back(mapper.map(out));
  return result;
}

void order_nodes_by_region(Graph& graph, PartitionResult& result) {
  const size_t n = graph.nodes.size();
  std::vector<size_t> new_index(n, n);
  std::vector<Node> nodes;
  nodes.reserve(n);
  for (Region& region : result.regions) {
    for (size_t& node : region.nodes) {
      new_index[node] = nodes.size();
      nodes.push_back(std::move(graph.nodes[node]));
      node = new_index[node];
    }
    for (Composite& composite : region.composites) {
      for (size_t& node : composite.nodes) node = new_index[node];
    }
  }
  if (nodes.size() != n) throw_internal_error("order_nodes_by_region: regions do not cover every node");
  graph.nodes = std::move(nodes);
  std::vector<NodeDecision> decisions(n);
  std::vector<size_t> region_of(n);
  for (size_t old = 0; old < n; ++old) {
    decisions[new_index[old]] = std::move(result.decisions[old]);
    region_of[new_index[old]] = result.region_of_node[old];
  }
  result.decisions = std::move(decisions);
  result.region_of_node = std::move(region_of);
}

}  // namespace tessera
