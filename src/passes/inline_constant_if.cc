#include "passes/inline_constant_if.h"

#include <set>

#include "passes/subgraph_copy.h"

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
  std::set<std::string> names = node_names(graph);
  SubgraphCopier copier(graph, branch, node.name + "/", names);
  // Captures: the branch's inputs are the If's inputs after the formal one, in that order.
  for (size_t k = 0; k < branch.inputs.size(); ++k) {
    const size_t outer = static_cast<size_t>(formal) + k;
    if (outer < node.inputs.size()) copier.bind(branch.inputs[k], node.inputs[outer]);
  }
  std::vector<Node> out = copier.copy_nodes();
  // Each If output takes the branch's output through an Identity (the branch may output a capture, a
  // constant or one value twice); remove_no_ops drops them.
  for (size_t j = 0; j < node.outputs.size() && j < branch.outputs.size(); ++j) {
    if (node.outputs[j] == kNoValue) continue;
    Node identity = copier.make_node("Identity", "output_" + std::to_string(j), node.opset);
    identity.inputs = {copier.value(branch.outputs[j])};
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
