#include "passes/unroll_constant_loop.h"

#include <set>

#include "passes/subgraph_copy.h"

namespace tessera {
namespace {

/// The constant one-element value `id` holds as an integer, or -1 (bools read as 0/1).
int64_t constant_scalar(const Graph& graph, ValueId id) {
  if (id == kNoValue || !graph.is_constant(id)) return -1;
  const Tensor& t = *graph.value(id).constant;
  if (t.numel() != 1) return -1;
  switch (t.dtype()) {
    case DType::kInt64: return *static_cast<const int64_t*>(t.data());
    case DType::kInt32: return *static_cast<const int32_t*>(t.data());
    case DType::kBool: return *static_cast<const uint8_t*>(t.data()) != 0 ? 1 : 0;
    default: return -1;
  }
}

/// Whether the body's cond output is always true when its cond input is: that input (through
/// Identities), a constant true, or a capture of one (an exporter's outer `true`).
bool body_keeps_going(const Graph& graph, const Node& node, const Graph& body, size_t formal) {
  if (body.inputs.size() < 2 || body.outputs.empty()) return false;
  ValueId id = body.outputs[0];
  for (size_t hops = 0; hops <= body.nodes.size(); ++hops) {
    if (id == body.inputs[1]) return true;
    for (size_t k = formal; k < body.inputs.size() && k < node.inputs.size(); ++k) {
      if (id == body.inputs[k]) return constant_scalar(graph, node.inputs[k]) == 1 && graph.value(node.inputs[k]).type.dtype == DType::kBool;
    }
    if (body.value(id).constant) {
      const Tensor& t = *body.value(id).constant;
      return t.dtype() == DType::kBool && t.numel() == 1 && *static_cast<const uint8_t*>(t.data()) != 0;
    }
    const Node* producer = nullptr;
    for (const Node& n : body.nodes) {
      for (ValueId out : n.outputs) {
        if (out == id) producer = &n;
      }
    }
    if (!producer || producer->op_type != "Identity" || !producer->domain.empty() || !producer->has_input(0)) return false;
    id = producer->inputs[0];
  }
  return false;
}

ValueId scalar_constant(Graph& graph, const std::string& name, Tensor value) {
  return graph.add_constant(graph.unique_value_name(name), std::move(value));
}

/// The nodes that replace `node` (a Loop of `trips` trips over `body`), adding their values to `graph`.
std::vector<Node> unroll(Graph& graph, const Node& node, const Graph& body, int64_t trips) {
  const size_t formal = static_cast<size_t>(node.attrs.get_int_or("tessera_formal_inputs", static_cast<int64_t>(node.inputs.size())));
  const size_t carried = formal - 2;
  const size_t scans = node.outputs.size() - carried;
  std::set<std::string> names = node_names(graph);
  Tensor yes(DType::kBool, {});
  *static_cast<uint8_t*>(yes.data()) = 1;
  const ValueId cond = scalar_constant(graph, node.name + "/cond", std::move(yes));
  std::vector<ValueId> values(node.inputs.begin() + 2, node.inputs.begin() + static_cast<std::ptrdiff_t>(formal));
  std::vector<std::vector<ValueId>> scan_parts(scans);
  std::vector<Node> out;
  for (int64_t trip = 0; trip < trips; ++trip) {
    const std::string prefix = node.name + "/" + std::to_string(trip) + "/";
    SubgraphCopier copier(graph, body, prefix, names);
    Tensor iteration(DType::kInt64, {});
    *static_cast<int64_t*>(iteration.data()) = trip;
    copier.bind(body.inputs[0], scalar_constant(graph, prefix + "iteration", std::move(iteration)));
    copier.bind(body.inputs[1], cond);
    for (size_t i = 0; i < carried; ++i) copier.bind(body.inputs[2 + i], values[i]);
    for (size_t k = formal; k < body.inputs.size() && k < node.inputs.size(); ++k) copier.bind(body.inputs[k], node.inputs[k]);
    std::vector<Node> nodes = copier.copy_nodes();
    out.insert(out.end(), std::make_move_iterator(nodes.begin()), std::make_move_iterator(nodes.end()));
    for (size_t i = 0; i < carried; ++i) values[i] = copier.value(body.outputs[1 + i]);
    for (size_t k = 0; k < scans; ++k) scan_parts[k].push_back(copier.value(body.outputs[1 + carried + k]));
  }
  SubgraphCopier tail(graph, body, node.name + "/", names);
  for (size_t i = 0; i < carried; ++i) {
    if (!node.has_output(i)) continue;
    Node identity = tail.make_node("Identity", "output_" + std::to_string(i), node.opset);
    identity.inputs = {values[i]};
    identity.outputs = {node.outputs[i]};
    out.push_back(std::move(identity));
  }
  const ValueId zero_axis = graph.add_constant(graph.unique_value_name(node.name + "/axes"), Tensor(DType::kInt64, {1}));  // [0]
  for (size_t k = 0; k < scans; ++k) {
    if (!node.has_output(carried + k)) continue;
    Node concat = tail.make_node("Concat", "scan_" + std::to_string(k), node.opset);
    concat.attrs.set("axis", Attribute::of_int(0));
    for (size_t trip = 0; trip < scan_parts[k].size(); ++trip) {
      Node unsqueeze = tail.make_node("Unsqueeze", "scan_" + std::to_string(k) + "/" + std::to_string(trip), node.opset);
      unsqueeze.inputs = {scan_parts[k][trip], zero_axis};  // the importer's form at every opset
      const ValueId part = graph.add_value(graph.unique_value_name(unsqueeze.name), TensorType{});
      unsqueeze.outputs = {part};
      concat.inputs.push_back(part);
      out.push_back(std::move(unsqueeze));
    }
    concat.outputs = {node.outputs[carried + k]};
    out.push_back(std::move(concat));
  }
  return out;
}

}  // namespace

std::vector<UnrolledLoop> unroll_constant_loops(Graph& graph) {
  std::vector<UnrolledLoop> unrolled;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    if (node.op_type != "Loop" || !node.domain.empty() || node.inputs.size() < 2) continue;
    const Attribute* attr = node.attrs.find("body");
    if (!attr || attr->kind != Attribute::Kind::kGraph || !attr->graph) continue;
    const Graph& body = *attr->graph;
    const int64_t formal = node.attrs.get_int_or("tessera_formal_inputs", static_cast<int64_t>(node.inputs.size()));
    if (formal < 2 || static_cast<size_t>(formal) > node.inputs.size()) continue;
    const size_t carried = static_cast<size_t>(formal) - 2;
    // The shapes inference checks; a Loop that does not fit them is left for it to report.
    if (node.outputs.size() < carried || body.inputs.size() != node.inputs.size() ||
        body.outputs.size() != 1 + node.outputs.size()) {
      continue;
    }
    const int64_t trips = constant_scalar(graph, node.inputs[0]);
    const int64_t copies = trips * static_cast<int64_t>(body.nodes.size() + 1);
    if (trips < 1 || trips > kMaxUnrolledTrips || copies > kMaxUnrolledNodes ||
        static_cast<int64_t>(graph.nodes.size()) + copies > 4 * kMaxUnrolledNodes) {  // nested loops multiply
      continue;
    }
    if (node.inputs[1] != kNoValue && constant_scalar(graph, node.inputs[1]) != 1) continue;
    if (!body_keeps_going(graph, node, body, static_cast<size_t>(formal))) continue;
    // A carried sequence (a list built trip by trip) stays in the Loop, which appends to it in place;
    // unrolled, each trip's SequenceInsert copies the list so far (256 rows: 2x slower).
    bool tensors_only = true;
    for (size_t k = 2; k < static_cast<size_t>(formal); ++k) {
      tensors_only &= node.inputs[k] != kNoValue && graph.value(node.inputs[k]).type.is_tensor();
    }
    if (!tensors_only) continue;
    const Node loop = node;  // unroll adds values and nodes; the node is replaced below
    std::vector<Node> nodes = unroll(graph, loop, body, trips);
    unrolled.push_back({loop.name, trips, nodes.size()});
    graph.nodes.erase(graph.nodes.begin() + static_cast<std::ptrdiff_t>(i));
    graph.nodes.insert(graph.nodes.begin() + static_cast<std::ptrdiff_t>(i), nodes.begin(), nodes.end());
    i += nodes.size();  // the copies' own Loops wait for the next round, after folding
    --i;
  }
  return unrolled;
}

}  // namespace tessera
