// See transpose_as_reshape.h.
#include "passes/transpose_as_reshape.h"

#include <cstring>

#include "ir/ops/tensor_internal.h"

namespace tessera {
namespace {

/// The Reshape target that makes `node` (a Transpose) a view, or empty where it is no view.
std::vector<int64_t> view_shape(const Graph& graph, const Node& node) {
  if (!node.domain.empty() || node.inputs.size() != 1 || !node.has_input(0) || !node.has_output(0)) return {};
  const TensorType& in = graph.value(node.inputs[0]).type;
  if (!in.is_tensor() || !in.rank_known || in.dims.empty()) return {};
  const int64_t rank = static_cast<int64_t>(in.dims.size());
  // (Shape inference already ran it on this node: a bad perm failed the compile there, naming the node.)
  const std::vector<int64_t> perm = transpose_perm(node, rank);
  // The dims that are not statically 1 must keep their order.
  int64_t last = -1;
  for (int64_t d : perm) {
    if (in.dims[static_cast<size_t>(d)] == 1) continue;
    if (d < last) return {};
    last = d;
  }
  std::vector<int64_t> shape;
  bool inferred = false;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = perm[static_cast<size_t>(i)];
    const int64_t size = in.dims[static_cast<size_t>(d)];
    if (size >= 0) {
      if (size == 0) return {};  // (Reshape's 0 would copy, not mean zero)
      shape.push_back(size);
    } else if (d == i) {
      shape.push_back(0);  // the input's dim at this index
    } else if (!inferred) {
      shape.push_back(-1);
      inferred = true;
    } else {
      return {};
    }
  }
  return shape;
}

}  // namespace

std::vector<std::string> transpose_as_reshape(Graph& graph) {
  std::vector<std::string> rewritten;
  for (size_t i = 0; i < graph.nodes.size(); ++i) {
    if (graph.nodes[i].op_type != "Transpose") continue;
    const std::vector<int64_t> shape = view_shape(graph, graph.nodes[i]);
    if (shape.empty()) continue;
    Tensor target(DType::kInt64, {static_cast<int64_t>(shape.size())});
    std::memcpy(target.data(), shape.data(), shape.size() * sizeof(int64_t));
    const ValueId id = graph.add_constant(graph.unique_value_name(graph.nodes[i].name + "_view_shape"), std::move(target));
    Node& node = graph.nodes[i];  // (after add_constant, which may grow other vectors)
    node.op_type = "Reshape";
    node.attrs.erase("perm");
    node.inputs.push_back(id);
    rewritten.push_back(node.name);
  }
  return rewritten;
}

}  // namespace tessera
