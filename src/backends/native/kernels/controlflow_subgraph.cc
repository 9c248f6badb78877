#include "backends/native/kernels/controlflow_internal.h"

namespace tessera::native {
namespace {

/// Values of one subgraph run: constants and inputs are views, the rest owned.
class SubgraphStore : public ValueStore {
 public:
  explicit SubgraphStore(const Graph& graph) : views_(graph.values.size()), owned_(graph.values.size()) {
    for (size_t i = 0; i < graph.values.size(); ++i) {
      if (graph.values[i].constant) views_[i] = graph.values[i].constant->view();
    }
  }
  const TensorView& get(ValueId id) override { return views_[static_cast<size_t>(id)]; }
  TensorView& output(ValueId id) override { return views_[static_cast<size_t>(id)]; }
  void allocate(ValueId id) override {
    TensorView& v = views_[static_cast<size_t>(id)];
    owned_[static_cast<size_t>(id)] = Tensor(v.dtype, v.shape);
    v.data = owned_[static_cast<size_t>(id)].data();
  }
  void bind(ValueId id, const TensorView& view) { views_[static_cast<size_t>(id)] = view; }

 private:
  std::vector<TensorView> views_;
  std::vector<Tensor> owned_;
};

}  // namespace

SubgraphProgram compile_subgraph(const Graph& graph) {
  SubgraphProgram program;
  program.graph = &graph;
  for (const Node& node : graph.nodes) {
    CompiledNode cn;
    cn.node = &node;
    cn.schema = OpRegistry::instance().find(node.domain, node.op_type);
    cn.kernel = KernelRegistry::instance().find(node.domain, node.op_type);
    if (!cn.schema || !cn.kernel) {
      throw_unsupported(node.describe(), " in subgraph '", graph.name, "': the native backend has no kernel for this op");
    }
    // No prepare state: kernels fall back to their unpacked paths, and shapes
    // are inferred on every run since subgraph values are typed only then.
    cn.outputs_static = false;
    program.nodes.push_back(cn);
  }
  return program;
}

std::vector<Tensor> run_subgraph(const SubgraphProgram& program, const std::vector<TensorView>& inputs,
                                 ThreadPool& pool) {
  const Graph& graph = *program.graph;
  if (inputs.size() != graph.inputs.size()) {
    throw_internal_error("subgraph '", graph.name, "' has ", graph.inputs.size(), " inputs but ", inputs.size(),
                         " were bound");
  }
  SubgraphStore store(graph);
  for (size_t i = 0; i < inputs.size(); ++i) store.bind(graph.inputs[i], inputs[i]);
  for (const CompiledNode& cn : program.nodes) run_node(cn, store, pool);
  std::vector<Tensor> outputs;
  for (ValueId id : graph.outputs) outputs.push_back(Tensor::from_view(store.get(id)));
  return outputs;
}

}  // namespace tessera::native
