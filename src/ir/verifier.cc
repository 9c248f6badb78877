#include "ir/verifier.h"

#include <set>
#include <vector>

#include "ir/error.h"
#include "ir/op_schema.h"

namespace tessera {

void verify_graph(const Graph& graph) {
  const size_t n = graph.values.size();
  std::vector<int> defined(n, 0);
  std::set<std::string> names;
  for (const Value& v : graph.values) {
    if (!names.insert(v.name).second) throw_internal_error("verifier: value name '", v.name, "' is not unique");
  }
  auto check_id = [&](ValueId id, const std::string& where) {
    if (id < 0 || static_cast<size_t>(id) >= n) throw_internal_error("verifier: ", where, " refers to value ", id, " which does not exist");
  };
  for (ValueId id : graph.inputs) {
    check_id(id, "graph input");
    if (graph.is_constant(id)) throw_internal_error("verifier: graph input '", graph.value(id).name, "' is a constant");
    ++defined[static_cast<size_t>(id)];
  }
  for (size_t i = 0; i < n; ++i) {
    if (graph.values[i].constant) ++defined[i];
  }
  std::set<std::string> node_names;
  for (const Node& node : graph.nodes) {
    if (!node_names.insert(node.name).second) throw_internal_error("verifier: node name '", node.name, "' is not unique");
    const OpSchema* schema = OpRegistry::instance().find(node.domain, node.op_type);
    if (!schema) throw_internal_error("verifier: ", node.describe(), " has no schema");
    for (ValueId id : node.inputs) {
      if (id == kNoValue) continue;
      check_id(id, node.describe());
      if (!defined[static_cast<size_t>(id)]) {
        throw_internal_error("verifier: ", node.describe(), " reads '", graph.value(id).name,
                             "' before it is defined (nodes out of topological order)");
      }
    }
    for (ValueId id : node.outputs) {
      if (id == kNoValue) continue;
      check_id(id, node.describe());
      if (++defined[static_cast<size_t>(id)] > 1) {
        throw_internal_error("verifier: value '", graph.value(id).name, "' is defined more than once");
      }
    }
  }
  for (ValueId id : graph.outputs) {
    check_id(id, "graph output");
    if (!defined[static_cast<size_t>(id)]) throw_internal_error("verifier: graph output '", graph.value(id).name, "' is never defined");
  }
}

}  // namespace tessera
