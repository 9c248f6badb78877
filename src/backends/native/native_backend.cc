// The native backend: runs each node with its kernel from KernelRegistry,
// re-running shape inference at run time only for nodes whose output shapes
// were not known at compile time.
#include "backends/native/native_backend.h"

#include <chrono>
#include <cstring>

#include "backends/native/kernel.h"
#include "backends/native/node_runner.h"
#include "ir/error.h"
#include "ir/op_schema.h"

namespace tessera {
namespace {

using native::KernelContext;
using native::KernelDef;
using native::KernelRegistry;
using native::ThreadPool;
using native::CompiledNode;
using native::run_node;

class NativeRegion : public ExecutableRegion {
 public:
  NativeRegion(std::vector<CompiledNode> nodes, std::vector<size_t> indices, int num_threads)
      : nodes_(std::move(nodes)), indices_(std::move(indices)), pool_(std::make_unique<ThreadPool>(num_threads)) {}

  void run(ValueStore& store) const override {
    if (!store.profiling()) {
      for (const CompiledNode& cn : nodes_) run_node(cn, store, *pool_);
      return;
    }
    for (size_t i = 0; i < nodes_.size(); ++i) {
      auto start = std::chrono::steady_clock::now();
      run_node(nodes_[i], store, *pool_);
      std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
      store.node_finished(indices_[i], elapsed.count());
    }
  }
  std::vector<size_t> node_indices() const override { return indices_; }

 private:
  std::vector<CompiledNode> nodes_;
  std::vector<size_t> indices_;
  std::unique_ptr<ThreadPool> pool_;
};

CompiledNode compile_node(const Graph& graph, const Node& node) {
  CompiledNode cn;
  cn.node = &node;
  cn.schema = OpRegistry::instance().find(node.domain, node.op_type);
  cn.kernel = KernelRegistry::instance().find(node.domain, node.op_type);
  if (!cn.schema || !cn.kernel) throw_unsupported(node.describe(), ": the native backend has no kernel for this op");
  cn.outputs_static = true;
  for (ValueId id : node.outputs) {
    if (id != kNoValue && !graph.value(id).type.is_static()) cn.outputs_static = false;
  }
  if (cn.kernel->prepare) {
    std::vector<const Tensor*> constants(node.inputs.size(), nullptr);
    std::vector<TensorType> types(node.inputs.size());
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] == kNoValue) continue;
      constants[i] = graph.value(node.inputs[i]).constant.get();
      types[i] = graph.value(node.inputs[i]).type;
    }
    cn.state = cn.kernel->prepare(node, constants, types);
  }
  return cn;
}

class NativeBackend : public Backend {
 public:
  std::string name() const override { return "native"; }
  std::string version() const override { return "1"; }
  std::string compatibility() const override { return "x86_64"; }
  SupportDecision supports(const Graph&, const Node& node) const override {
    if (!KernelRegistry::instance().find(node.domain, node.op_type)) {
      return {false, "no native kernel for " + node.op_type};
    }
    return {true, ""};
  }
  std::unique_ptr<ExecutableRegion> compile(const Graph& graph, const std::vector<size_t>& nodes,
                                            const RegionOptions& options) const override {
    std::vector<CompiledNode> compiled;
    compiled.reserve(nodes.size());
    for (size_t index : nodes) compiled.push_back(compile_node(graph, graph.nodes[index]));
    return std::make_unique<NativeRegion>(std::move(compiled), nodes, options.num_threads);
  }
};

/// A ValueStore over local tensors, for evaluating single nodes.
class LocalStore : public ValueStore {
 public:
  explicit LocalStore(size_t n) : views_(n), owned_(n) {}
  const TensorView& get(ValueId id) override { return views_[static_cast<size_t>(id)]; }
  TensorView& output(ValueId id) override { return views_[static_cast<size_t>(id)]; }
  void allocate(ValueId id) override {
    TensorView& v = views_[static_cast<size_t>(id)];
    owned_[static_cast<size_t>(id)] = Tensor(v.dtype, v.shape);
    v.data = owned_[static_cast<size_t>(id)].data();
  }
  void bind(ValueId id, const Tensor& t) { views_[static_cast<size_t>(id)] = t.view(); }
  Tensor take(ValueId id) { return owned_[static_cast<size_t>(id)]; }

 private:
  std::vector<TensorView> views_;
  std::vector<Tensor> owned_;
};

}  // namespace

std::unique_ptr<Backend> make_native_backend() { return std::make_unique<NativeBackend>(); }

std::vector<Tensor> evaluate_node_natively(const Node& original, const std::vector<const Tensor*>& inputs) {
  // Renumber the node's values 0..k so that it can run against a LocalStore.
  Node node = original;
  Graph scratch;
  LocalStore store(original.inputs.size() + original.outputs.size());
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue) continue;
    node.inputs[i] = static_cast<ValueId>(i);
    store.bind(node.inputs[i], *inputs[i]);
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kNoValue) continue;
    node.outputs[i] = static_cast<ValueId>(original.inputs.size() + i);
  }
  CompiledNode cn;
  cn.node = &node;
  cn.schema = OpRegistry::instance().find(node.domain, node.op_type);
  cn.kernel = KernelRegistry::instance().find(node.domain, node.op_type);
  if (!cn.schema || !cn.kernel) throw_unsupported(node.describe(), ": no native kernel");
  if (cn.kernel->prepare) {
    std::vector<TensorType> types(node.inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i]) types[i] = TensorType::make(inputs[i]->dtype(), inputs[i]->shape());
    }
    cn.state = cn.kernel->prepare(node, inputs, types);
  }
  ThreadPool pool(1);
  run_node(cn, store, pool);
  std::vector<Tensor> outputs(node.outputs.size());
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kNoValue) continue;
    Tensor t = store.take(node.outputs[i]);
    const TensorView& v = store.get(node.outputs[i]);
    if (!t.defined() || t.data() != v.data) t = Tensor::from_view(v);
    outputs[i] = t;
  }
  return outputs;
}

}  // namespace tessera
