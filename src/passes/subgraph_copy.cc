#include "passes/subgraph_copy.h"

namespace tessera {

SubgraphCopier::SubgraphCopier(Graph& graph, const Graph& sub, std::string prefix, std::set<std::string>& names)
    : graph_(graph), sub_(sub), prefix_(std::move(prefix)), names_(names), map_(sub.values.size(), kNoValue) {}

ValueId SubgraphCopier::value(ValueId id) {
  if (id == kNoValue) return kNoValue;
  ValueId& mapped = map_[static_cast<size_t>(id)];
  if (mapped != kNoValue) return mapped;
  const Value& v = sub_.value(id);
  mapped = graph_.add_value(graph_.unique_value_name(prefix_ + v.name), v.type);
  graph_.value(mapped).constant = v.constant;  // shared, not copied
  return mapped;
}

std::string SubgraphCopier::node_name(const std::string& name) {
  std::string unique = prefix_ + name;
  while (names_.count(unique)) unique += "_";
  names_.insert(unique);
  return unique;
}

Node SubgraphCopier::make_node(const std::string& op_type, const std::string& name, int opset) {
  Node node;
  node.name = node_name(name);
  node.op_type = op_type;
  node.opset = opset;
  return node;
}

std::vector<Node> SubgraphCopier::copy_nodes() {
  std::vector<Node> out;
  for (const Node& inner : sub_.nodes) {
    Node copy = inner;
    copy.name = node_name(inner.name);
    for (ValueId& id : copy.inputs) id = value(id);
    for (ValueId& id : copy.outputs) id = value(id);
    out.push_back(std::move(copy));
  }
  return out;
}

std::set<std::string> node_names(const Graph& graph) {
  std::set<std::string> names;
  for (const Node& n : graph.nodes) names.insert(n.name);
  return names;
}

}  // namespace tessera
