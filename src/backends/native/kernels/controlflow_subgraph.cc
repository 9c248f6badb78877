#include "backends/native/kernels/controlflow_internal.h"

#include <map>

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
  BoxedValue& boxed(ValueId id) override { return boxed_[static_cast<size_t>(id)]; }

 private:
  std::vector<TensorView> views_;
  std::vector<Tensor> owned_;
  std::map<size_t, BoxedValue> boxed_;
};

/// The type of each subgraph value as far as inference gets with `input_types`:
/// what decides which values are sequences or optionals. A node whose
/// inference fails keeps the model's declared types (run-time inference, with
/// values, reports real errors).
std::vector<TensorType> infer_value_types(const Graph& graph, const std::vector<TensorType>& input_types) {
  std::vector<TensorType> types(graph.values.size());
  std::vector<TensorView> constant_views(graph.values.size());
  for (size_t i = 0; i < graph.values.size(); ++i) {
    const Value& v = graph.values[i];
    types[i] = v.type;
    if (v.constant) {
      types[i] = TensorType::make(v.constant->dtype(), v.constant->shape());
      constant_views[i] = v.constant->view();
    }
  }
  for (size_t k = 0; k < graph.inputs.size() && k < input_types.size(); ++k) {
    const TensorType& given = input_types[k];
    TensorType& t = types[static_cast<size_t>(graph.inputs[k])];
    if (given.dtype != DType::kUndefined || !given.is_tensor()) t = given;
  }
  for (const Node& node : graph.nodes) {
    const OpSchema* schema = OpRegistry::instance().find(node.domain, node.op_type);
    std::vector<const TensorType*> in_types(node.inputs.size(), nullptr);
    std::vector<const TensorView*> in_values(node.inputs.size(), nullptr);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] == kNoValue) continue;
      in_types[i] = &types[static_cast<size_t>(node.inputs[i])];
      if (graph.values[static_cast<size_t>(node.inputs[i])].constant) in_values[i] = &constant_views[static_cast<size_t>(node.inputs[i])];
    }
    std::vector<TensorType> out_types(node.outputs.size());
    try {
      if (!schema) continue;
      InferContext ctx(node, in_types, in_values, &out_types);
      run_shape_inference(*schema, ctx);
    } catch (const Error&) {
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i] != kNoValue) out_types[i] = graph.value(node.outputs[i]).type;
      }
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] != kNoValue) types[static_cast<size_t>(node.outputs[i])] = out_types[i];
    }
  }
  return types;
}

}  // namespace

SubgraphProgram compile_subgraph(const Graph& graph, const std::vector<TensorType>& input_types) {
  SubgraphProgram program;
  program.graph = &graph;
  const std::vector<TensorType> types = infer_value_types(graph, input_types);
  for (const TensorType& t : types) program.kinds.push_back(t.kind);
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
    // Nested control flow is the exception: an If, Loop, Scan or SequenceMap
    // inside a body compiles its own bodies here, once, where the types of its
    // inputs are known, instead of on every trip of the enclosing loop.
    cn.outputs_static = false;
    if (cn.kernel->prepare && node.domain.empty() &&
        (node.op_type == "If" || node.op_type == "Loop" || node.op_type == "Scan" || node.op_type == "SequenceMap")) {
      std::vector<TensorType> in_types;
      bool known = true;
      for (ValueId id : node.inputs) {
        in_types.push_back(id == kNoValue ? TensorType{} : types[static_cast<size_t>(id)]);
        known &= id == kNoValue || in_types.back().dtype != DType::kUndefined;
      }
      if (known) cn.state = cn.kernel->prepare(node, std::vector<const Tensor*>(node.inputs.size(), nullptr), in_types);
    }
    bool any_boxed = false;
    for (ValueId id : node.inputs) any_boxed |= id != kNoValue && types[static_cast<size_t>(id)].kind != ValueKind::kTensor;
    for (ValueId id : node.outputs) any_boxed |= id != kNoValue && types[static_cast<size_t>(id)].kind != ValueKind::kTensor;
    if (any_boxed) {
      for (ValueId id : node.inputs) cn.boxed_inputs.push_back(id != kNoValue && types[static_cast<size_t>(id)].kind != ValueKind::kTensor);
      for (ValueId id : node.outputs) cn.boxed_outputs.push_back(id != kNoValue && types[static_cast<size_t>(id)].kind != ValueKind::kTensor);
    }
    program.nodes.push_back(std::move(cn));
  }
  // A box read for the last time by a node (not a graph output, not read twice by that node) may be
  // taken over by its kernel instead of copied.
  std::vector<size_t> last_reader(graph.values.size(), SIZE_MAX);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    for (ValueId id : graph.nodes[n].inputs) {
      if (id != kNoValue) last_reader[static_cast<size_t>(id)] = n;
    }
  }
  for (ValueId id : graph.outputs) last_reader[static_cast<size_t>(id)] = SIZE_MAX;
  for (size_t n = 0; n < program.nodes.size(); ++n) {
    CompiledNode& cn = program.nodes[n];
    if (cn.boxed_inputs.empty()) continue;
    const Node& node = *cn.node;
    cn.movable_inputs.assign(node.inputs.size(), 0);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const ValueId id = node.inputs[i];
      if (id == kNoValue || !cn.boxed_inputs[i] || graph.is_constant(id) || last_reader[static_cast<size_t>(id)] != n) continue;
      size_t uses = 0;
      for (ValueId other : node.inputs) uses += other == id;
      cn.movable_inputs[i] = uses == 1;
    }
  }
  return program;
}

std::vector<SubgraphValue> run_subgraph(const SubgraphProgram& program, std::vector<SubgraphValue> inputs,
                                        ThreadPool& pool) {
  const Graph& graph = *program.graph;
  if (inputs.size() != graph.inputs.size()) {
    throw_internal_error("subgraph '", graph.name, "' has ", graph.inputs.size(), " inputs but ", inputs.size(),
                         " were bound");
  }
  SubgraphStore store(graph);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool expects_box = program.kinds[static_cast<size_t>(graph.inputs[i])] != ValueKind::kTensor;
    if (inputs[i].boxed() != expects_box) {
      throw_user_error("subgraph '", graph.name, "' input '", graph.value(graph.inputs[i]).name, "' is a ",
                       expects_box ? "sequence or optional" : "tensor", " but ",
                       inputs[i].boxed() ? value_kind_phrase(inputs[i].boxed_value().kind) : "a tensor", " was given");
    }
    if (expects_box) {
      if (inputs[i].made_box) {
        store.boxed(graph.inputs[i]) = std::move(*inputs[i].made_box);
      } else {
        store.boxed(graph.inputs[i]) = *inputs[i].box;
      }
    } else {
      store.bind(graph.inputs[i], inputs[i].tensor.defined() ? inputs[i].tensor.view() : inputs[i].view);
    }
  }
  for (const CompiledNode& cn : program.nodes) run_node(cn, store, pool);
  std::vector<SubgraphValue> outputs(graph.outputs.size());
  for (size_t k = 0; k < graph.outputs.size(); ++k) {
    const ValueId id = graph.outputs[k];
    if (program.kinds[static_cast<size_t>(id)] != ValueKind::kTensor) {
      // Moved out at the value's last listing among the outputs (the store ends here), copied before it.
      bool listed_later = false;
      for (size_t j = k + 1; j < graph.outputs.size(); ++j) listed_later |= graph.outputs[j] == id;
      if (listed_later) {
        outputs[k].made_box = store.boxed(id);
      } else {
        outputs[k].made_box = std::move(store.boxed(id));
      }
    } else {
      outputs[k].tensor = Tensor::from_view(store.get(id));
    }
  }
  return outputs;
}

std::vector<TensorType> run_time_input_types(const KernelContext& ctx, size_t first) {
  std::vector<TensorType> out;
  for (size_t i = first; i < ctx.num_inputs(); ++i) {
    if (const BoxedValue* box = ctx.boxed_input(i)) {
      TensorType t;
      t.kind = box->kind;
      if (!box->items.empty()) t.dtype = box->items.front().dtype();
      out.push_back(t);
    } else if (ctx.has_input(i)) {
      out.push_back(TensorType::make(ctx.input(i).dtype, ctx.input(i).shape));
    } else {
      out.emplace_back();
    }
  }
  return out;
}

}  // namespace tessera::native
