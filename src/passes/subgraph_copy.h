// Copies a subgraph's nodes into its parent graph, for the passes that put a
// body in place of its node (inline_constant_if, unroll_constant_loop).
//
// `map` is indexed by the subgraph's value ids: entries already set (the
// body's inputs, bound to outer values by the caller) are used as they are;
// every other value the copied nodes touch gets a new parent value named
// `prefix` + its name (made unique), with the subgraph's type, and its
// constant shared, not copied. Node names are `prefix` + the node's name, made
// unique against `names` (which the copies join). Subgraphs inside the copied
// nodes are kept as they are: their captures are the copies' inputs.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

class SubgraphCopier {
 public:
  SubgraphCopier(Graph& graph, const Graph& sub, std::string prefix, std::set<std::string>& names);
  /// The parent value of subgraph value `id` (kNoValue stays kNoValue).
  ValueId value(ValueId id);
  /// Binds subgraph value `id` to parent value `outer` before the copy.
  void bind(ValueId id, ValueId outer) { map_[static_cast<size_t>(id)] = outer; }
  /// The copies of every node of the subgraph, in order.
  std::vector<Node> copy_nodes();
  /// A node of `op_type` named prefix + `name` (unique), at `opset`.
  Node make_node(const std::string& op_type, const std::string& name, int opset);

 private:
  /// prefix + `name`, made unique against (and added to) names_.
  std::string node_name(const std::string& name);

  Graph& graph_;
  const Graph& sub_;
  std::string prefix_;
  std::set<std::string>& names_;
  std::vector<ValueId> map_;
};

/// The names of `graph`'s nodes (what SubgraphCopier keeps new names apart from).
std::set<std::string> node_names(const Graph& graph);

}  // namespace tessera
