#include "runtime/session.h"

#include <cstdlib>
#include <cstring>
#include <iostream>

#include "backends/native/native_backend.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/bind_input_shapes.h"
#include "passes/fuse_activations.h"
#include "passes/infer_and_fold.h"

namespace tessera {
namespace {

bool dump_after_each_pass() {
  const char* dump = std::getenv("TESSERA_DUMP");
  return dump && std::string(dump) == "after-each-pass";
}

/// TESSERA_POISON=1 fills every run's arena and every run-time allocation
/// with 0xFF bytes (NaN for floats) before kernels run, so a kernel that reads
/// memory it has not written (or counts on zeroed outputs) fails its tests.
bool poison_memory() {
  static const bool poison = [] {
    const char* value = std::getenv("TESSERA_POISON");
    return value && std::string(value) == "1";
  }();
  return poison;
}

bool verify_between_passes() {
#ifndef NDEBUG
  return true;
#else
  const char* verify = std::getenv("TESSERA_VERIFY");
  return verify && std::string(verify) == "1";
#endif
}

void after_pass(const Graph& graph, const char* pass) {
  if (dump_after_each_pass()) std::cerr << "// after " << pass << "\n" << print_graph(graph);
  if (verify_between_passes()) {
    try {
      verify_graph(graph);
    } catch (const Error& e) {
      throw_internal_error("after pass ", pass, ": ", e.what());
    }
  }
}

/// Per-run values: inputs point at the caller's data, intermediates into the
/// arena, outputs at caller buffers or owned tensors, dynamic values owned.
class RunStore : public ValueStore {
 public:
  RunStore(const Graph& graph, const MemoryPlan& plan, Buffer& arena)
      : graph_(graph), views_(graph.values.size()), owned_(graph.values.size()) {
    auto* base = static_cast<char*>(arena.data());
    if (poison_memory()) std::memset(base, 0xFF, arena.size());
    for (size_t i = 0; i < graph.values.size(); ++i) {
      const Value& v = graph.values[i];
      if (v.constant) {
        views_[i] = v.constant->view();
      } else if (v.type.is_static()) {
        views_[i].dtype = v.type.dtype;
        views_[i].shape = v.type.dims;
        if (plan.offsets[i] != MemoryPlan::kNotPlanned) views_[i].data = base + plan.offsets[i];
      }
    }
  }
  const TensorView& get(ValueId id) override { return views_[static_cast<size_t>(id)]; }
  TensorView& output(ValueId id) override {
    TensorView& v = views_[static_cast<size_t>(id)];
    if (!v.data && graph_.value(id).type.is_static()) allocate(id);
    return v;
  }
  void allocate(ValueId id) override {
    TensorView& v = views_[static_cast<size_t>(id)];
    owned_[static_cast<size_t>(id)] = Tensor(v.dtype, v.shape);
    v.data = owned_[static_cast<size_t>(id)].data();
    if (poison_memory()) std::memset(v.data, 0xFF, owned_[static_cast<size_t>(id)].nbytes());
  }
  void bind(ValueId id, const TensorView& view) { views_[static_cast<size_t>(id)] = view; }
  void set_profile(std::vector<double>* node_milliseconds) { node_milliseconds_ = node_milliseconds; }
  bool profiling() const override { return node_milliseconds_ != nullptr; }
  void node_finished(size_t node_index, double milliseconds) override {
    (*node_milliseconds_)[node_index] += milliseconds;
  }
  /// The owned tensor holding a value, or a copy when the value lives elsewhere.
  Tensor take(ValueId id) {
    const TensorView& v = views_[static_cast<size_t>(id)];
    Tensor& t = owned_[static_cast<size_t>(id)];
    if (t.defined() && t.data() == v.data && t.shape() == v.shape) return t;
    return Tensor::from_view(v);
  }

 private:
  const Graph& graph_;
  std::vector<TensorView> views_;
  std::vector<Tensor> owned_;
  std::vector<double>* node_milliseconds_ = nullptr;
};

}  // namespace

CompiledModel::~CompiledModel() = default;

/// Takes an arena from the model's free list (or makes one) for the length of
/// a run and gives it back afterwards: concurrent runs each get their own, and
/// repeated runs reuse memory that is already mapped, never cleared (every
/// planned value is written before it is read).
class CompiledModel::ArenaLease {
 public:
  explicit ArenaLease(const CompiledModel& model) : model_(model) {
    {
      std::lock_guard<std::mutex> lock(model.arena_mutex_);
      if (!model.free_arenas_.empty()) {
        buffer_ = std::move(model.free_arenas_.back());
        model.free_arenas_.pop_back();
      }
    }
    if (!buffer_) buffer_ = std::make_unique<Buffer>(static_cast<size_t>(model.memory_plan_.arena_bytes), false);
  }
  ~ArenaLease() {
    std::lock_guard<std::mutex> lock(model_.arena_mutex_);
    model_.free_arenas_.push_back(std::move(buffer_));
  }
  Buffer& buffer() { return *buffer_; }

 private:
  const CompiledModel& model_;
  std::unique_ptr<Buffer> buffer_;
};

std::unique_ptr<CompiledModel> CompiledModel::compile(Graph graph, const CompileOptions& options) {
  std::unique_ptr<CompiledModel> model(new CompiledModel());
  after_pass(graph, "import");
  for (const Value& v : graph.values) {
    if (v.constant) model->parameter_count_ += v.constant->numel();
  }
  bind_input_shapes(graph, options.input_shapes);
  after_pass(graph, "bind_input_shapes");
  std::vector<std::string> node_names_before;
  std::vector<std::string> node_ops_before;
  for (const Node& node : graph.nodes) {
    node_names_before.push_back(node.name);
    node_ops_before.push_back(node.op_type);
  }
  infer_and_fold(graph, evaluate_node_natively);
  after_pass(graph, "infer_and_fold");
  eliminate_dead_nodes(graph);
  after_pass(graph, "eliminate_dead_nodes");
  fuse_activations(graph);
  after_pass(graph, "fuse_activations");

  // Partitioning: with only the native backend, one region holds every node.
  model->backends_.push_back(make_native_backend());
  const Backend& native = *model->backends_.back();
  std::vector<size_t> all_nodes(graph.nodes.size());
  for (size_t i = 0; i < all_nodes.size(); ++i) {
    SupportDecision decision = native.supports(graph, graph.nodes[i]);
    if (!decision.supported) throw_unsupported(graph.nodes[i].describe(), ": ", decision.reason);
    all_nodes[i] = i;
  }
  model->graph_ = std::move(graph);
  const Graph& g = model->graph_;
  RegionOptions region_options;
  region_options.num_threads = options.num_threads;
  if (!all_nodes.empty()) model->regions_.push_back(native.compile(g, all_nodes, region_options));
  model->memory_plan_ = plan_memory(g);

  // Placement lists the executed nodes first (index = graph node index, as
  // profiles use), then nodes fused into them, then nodes folded away.
  std::map<std::string, bool> accounted;
  for (const Node& node : g.nodes) {
    model->placement_.push_back({node.name, node.op_type, native.name(), ""});
    accounted[node.name] = true;
  }
  for (const Node& node : g.nodes) {
    for (const FusedNode& fused : node.fused) {
      model->placement_.push_back({fused.name, fused.op_type, native.name(), "fused into '" + node.name + "'"});
      accounted[fused.name] = true;
    }
  }
  for (size_t i = 0; i < node_names_before.size(); ++i) {
    if (!accounted.count(node_names_before[i])) {
      model->placement_.push_back({node_names_before[i], node_ops_before[i], "folded", "computed at compile time"});
    }
  }
  for (ValueId id : g.inputs) model->inputs_.push_back({g.value(id).name, g.value(id).type.dtype, g.value(id).type.dims});
  for (ValueId id : g.outputs) {
    const TensorType& t = g.value(id).type;
    model->outputs_.push_back({g.value(id).name, t.dtype, t.rank_known ? t.dims : Shape{}});
  }
  return model;
}

int64_t CompiledModel::constant_bytes() const {
  int64_t total = 0;
  for (const Value& v : graph_.values) {
    if (v.constant) total += static_cast<int64_t>(v.constant->nbytes());
  }
  return total;
}

void CompiledModel::validate_inputs(const std::vector<TensorView>& inputs) const {
  if (inputs.size() != inputs_.size()) {
    throw_user_error("the model has ", inputs_.size(), " inputs but ", inputs.size(), " were given");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueDesc& want = inputs_[i];
    const TensorView& got = inputs[i];
    if (got.dtype != want.dtype || got.shape != want.shape) {
      throw_user_error("input '", want.name, "': expected ", dtype_name(want.dtype), "[", shape_to_string(want.shape),
                       "], got ", dtype_name(got.dtype), "[", shape_to_string(got.shape), "]");
    }
    if (!got.data && got.numel() != 0) throw_user_error("input '", want.name, "' has no data");
  }
}

std::vector<Tensor> CompiledModel::run(const std::vector<TensorView>& inputs,
                                       const std::vector<TensorView*>& caller_outputs,
                                       std::vector<double>* node_milliseconds) const {
  validate_inputs(inputs);
  if (!caller_outputs.empty() && caller_outputs.size() != outputs_.size()) {
    throw_user_error("the model has ", outputs_.size(), " outputs but ", caller_outputs.size(), " output buffers were given");
  }
  ArenaLease arena(*this);
  RunStore store(graph_, memory_plan_, arena.buffer());
  if (node_milliseconds) {
    // placement_ lists graph_.nodes first, in order, then the folded nodes.
    node_milliseconds->resize(placement_.size(), 0.0);
    store.set_profile(node_milliseconds);
  }
  for (size_t i = 0; i < inputs.size(); ++i) store.bind(graph_.inputs[i], inputs[i]);
  // Outputs computed by a node are written straight into the caller's buffer.
  std::vector<char> written_in_place(outputs_.size(), 0);
  for (size_t i = 0; i < caller_outputs.size(); ++i) {
    TensorView* dest = caller_outputs[i];
    if (!dest) continue;
    const ValueDesc& want = outputs_[i];
    if (dest->dtype != want.dtype || dest->shape != want.shape) {
      throw_user_error("output '", want.name, "': buffer is ", dtype_name(dest->dtype), "[", shape_to_string(dest->shape),
                       "], the model produces ", dtype_name(want.dtype), "[", shape_to_string(want.shape), "]");
    }
    ValueId id = graph_.outputs[i];
    bool computed = !graph_.is_constant(id);
    for (ValueId in : graph_.inputs) computed &= in != id;
    for (size_t j = 0; j < i; ++j) computed &= graph_.outputs[j] != id;
    if (computed) {
      store.bind(id, *dest);
      written_in_place[i] = 1;
    }
  }
  for (const auto& region : regions_) region->run(store);
  std::vector<Tensor> results(outputs_.size());
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (written_in_place[i]) continue;
    Tensor t = store.take(graph_.outputs[i]);
    if (i < caller_outputs.size() && caller_outputs[i]) {
      if (t.nbytes()) std::memcpy(caller_outputs[i]->data, t.data(), t.nbytes());
    } else {
      results[i] = t;
    }
  }
  return results;
}

}  // namespace tessera
