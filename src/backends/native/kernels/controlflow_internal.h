// The control-flow kernels' subgraph interpreter: runs a subgraph's nodes in
// order with the native kernels, allocating every value at run time (each
// node's shape inference runs on the actual inputs).
#pragma once
#include <cstring>
#include <vector>

#include "backends/native/node_runner.h"

namespace tessera::native {

/// A subgraph with its nodes' schemas and kernels looked up.
struct SubgraphProgram {
  const Graph* graph = nullptr;
  std::vector<CompiledNode> nodes;
};

/// Throws unsupported naming the first node the native backend cannot run.
SubgraphProgram compile_subgraph(const Graph& graph);

/// Runs `program` with its graph inputs bound to `inputs` (formal inputs then
/// captures) and returns deep copies of its outputs.
std::vector<Tensor> run_subgraph(const SubgraphProgram& program, const std::vector<TensorView>& inputs,
                                 ThreadPool& pool);

/// Registers Scan (controlflow_scan.cc).
void register_scan_kernel(KernelRegistry& registry);

// Helpers shared by the If, Loop and Scan kernels.

inline const Graph& graph_attr(const Node& node, const std::string& name) {
  const Attribute* a = node.attrs.find(name);
  if (!a || a->kind != Attribute::Kind::kGraph || !a->graph) {
    throw_user_error(node.describe(), ": attribute '", name, "' must be a subgraph");
  }
  return *a->graph;
}

inline size_t formal_inputs(const KernelContext& ctx) {
  return static_cast<size_t>(ctx.attrs().get_int_or("tessera_formal_inputs", static_cast<int64_t>(ctx.num_inputs())));
}

inline std::vector<TensorView> captured_views(const KernelContext& ctx, size_t first) {
  std::vector<TensorView> out;
  for (size_t i = first; i < ctx.num_inputs(); ++i) out.push_back(ctx.input(i));
  return out;
}

/// Writes `value` to output i, allocating it when the planned view does not fit.
inline void write_output(const KernelContext& ctx, size_t i, const TensorView& value) {
  if (!ctx.has_output(i)) return;
  TensorView& out = ctx.output(i);
  if (!out.data || out.dtype != value.dtype || out.shape != value.shape) {
    ctx.allocate_output(i, value.dtype, value.shape);
  }
  if (value.nbytes()) std::memcpy(out.data, value.data, value.nbytes());
}

}  // namespace tessera::native
