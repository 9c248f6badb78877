#include "passes/inline_constant_if.h"

#include <set>

namespace tessera {
namespace {

/// The If's condition when it is a constant holding one bool, else -1.
int constant_condition(const Graph& graph, const Node& node) {
  if (node.inputs.empty() || !graph.is_constant(node.inputs[0])) return -1;
  const Tensor& cond = *graph.value(node.inputs[0]).constant;
  if (cond.dtype() != DType::kBool || cond.numel() != 1) return -1;  // the kernel reports it at run time
  return *static_cast<const uint8_t*>(cond.data()) != 0 ? 1 : 0;
}

/// The nodes that replace `node` (an If taking `branch`), adding their values to `graph`.
std::vector<Node> inline_branch(Graph& graph, const Node& node, const Graph& branch) {
  const int64_t formal = node.attrs.get_int_or("tessera_formal_inputs", 1);
  std::vector<ValueId> map(branch.values.size(), kNoValue);
  // Captures: the branch's inputs are the If's inputs after the formal one, in that order.
  for (size_t k = 0; k < branch.inputs.size(); ++k) {
    const size_t outer = static_cast<size_t>(formal) + k;
    if (outer < node.inputs.size()) map[static_cast<size_t>(branch.inputs[k])] = node.inputs[outer];
  }
  const std::string prefix = node.name + "/";
  auto value_of = [&](ValueId id) -> ValueId {
    if (id == kNoValue) return kNoValue;
    ValueId& mapped = map[static_cast<size_t>(id)];
    if (mapped != kNoValue) return mapped;
    const Value& v = branch.value(id);
    const std::string name = graph.unique_value_name(prefix + v.name);
    mapped = graph.add_value(name, v.type);
    graph.value(mapped).constant = v.constant;  // shared, not copied
    return mapped;
  };
  std::set<std::string> names;
  for (const Node& n : graph.nodes) names.insert(n.name);
  std::vector<Node> out;
  for (const Node& inner : branch.nodes) {
    Node copy = inner;
    copy.name = prefix + inner.name;
    while (names.count(copy.name)) copy.name += "_";
    names.insert(copy.name);
    for (ValueId& id : copy.inputs) id = value_of(id);
    for (ValueId& id : copy.outputs) id = value_of(id);
    out.push_back(std::move(copy));
  }
  // Each If output takes the branch's output through an Identity (the branch may output a capture, a
  // constant or one value twice); remove_no_ops drops them.
  for (size_t j = 0; j < node.outputs.size() && j < branch.outputs.size(); ++j) {
    if (node.outputs[j] == kNoValue) continue;
    Node identity;
    identity.name = prefix + "output_" + std::to_string(j);
    while (names.count(identity.name)) identity.name += "_";
    names.insert(identity.name);
    identity.op_type = "Identity";
    identity.opset = node.opset;
    identity.inputs = {value_of(branch.outputs[j])};
    identity.outputs = {node.outputs[j]};
    out.push_back(std::move(identity));
  }
  return out;
}

}  // namespace

std::vector<InlinedIf> inline_constant_if(Graph& graph) {
  std::vector<InlinedIf> inlined;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      const Node& node = graph.nodes[i];
      if (node.op_type != "If" || !node.domain.empty()) continue;
      const int cond = constant_condition(graph, node);
      if (cond < 0) continue;
      const Attribute* attr = node.attrs.find(cond ? "then_branch" : "else_branch");
      if (!attr || attr->kind != Attribute::Kind::kGraph || !attr->graph) continue;
      if (node.outputs.size() != attr->graph->outputs.size()) continue;  // inference reports the mismatch
      const Node taken = node;  // inline_branch adds values; the node is replaced below
      std::vector<Node> nodes = inline_branch(graph, taken, *attr->graph);
      inlined.push_back({taken.name, cond == 1, nodes.size()});
      graph.nodes.erase(graph.nodes.begin() + static_cast<std::ptrdiff_t>(i));
      graph.nodes.insert(graph.nodes.begin() + static_cast<std::ptrdiff_t>(i), nodes.begin(), nodes.end());
      changed = true;
      break;
    }
  }
  return inlined;
}

}  // namespace tessera
