// The host side of a backend plug-in (plugin_backend.h). Every call into the
// plug-in goes through one of three objects: PluginBackend (support, patterns,
// compile, load), PluginMemorySpace (allocate, copy) and PluginRegion (run).
// Each turns a returned tsrp_status into the host's Error, prefixed with the
// plug-in's name, and frees what the plug-in handed over; nothing the plug-in
// does can throw into it (it is C).
#include "backends/plugin/plugin_backend.h"

#include <chrono>
#include <mutex>

#include "backends/plugin/graph_view.h"
#include "backends/plugin/plugin_patterns.h"
#include "backends/plugin/plugin_status.h"
#include "ir/error.h"
#include "partition/declarations.h"

namespace tessera {
namespace {

class PluginMemorySpace : public MemorySpace {
 public:
  PluginMemorySpace(const tsrp_memory_space& space, std::string context) : space_(space), context_(std::move(context)) {
    name_ = space.name ? space.name : "plugin-device";
  }
  std::string name() const override { return name_; }
  void* allocate(size_t bytes) override {
    void* data = nullptr;
    throw_if_error(space_.allocate(space_.context, bytes, &data), context_ + "allocate " + std::to_string(bytes) + " bytes: ");
    if (!data) throw_internal_error(context_, "allocate returned no memory for ", bytes, " bytes");
    return data;
  }
  void deallocate(void* data) override {
    if (data) space_.deallocate(space_.context, data);
  }
  void copy_from_host(void* device_dst, const void* host_src, size_t bytes) override {
    throw_if_error(space_.copy_from_host(space_.context, device_dst, host_src, bytes), context_ + "copy to device: ");
  }
  void copy_to_host(void* host_dst, const void* device_src, size_t bytes) override {
    throw_if_error(space_.copy_to_host(space_.context, host_dst, device_src, bytes), context_ + "copy from device: ");
  }
  void synchronize() override {
    if (TSRP_HAS_MEMBER(&space_, tsrp_memory_space, synchronize) && space_.synchronize) {
      throw_if_error(space_.synchronize(space_.context), context_ + "synchronize: ");
    }
  }

 private:
  const tsrp_memory_space& space_;
  std::string context_;
  std::string name_;
};

/// One run's arguments and the host side of its callbacks.
struct RunContext {
  ValueStore* store = nullptr;
  const Graph* region = nullptr;
  std::vector<DLTensor> inputs;
  std::vector<DLTensor> outputs;
  std::vector<Shape> output_shapes;  // storage the output DLTensors' shapes point at
  DLDevice device{};
  std::string where;
};

extern "C" tsrp_status* allocate_output_callback(void* host_context, size_t index, const int64_t* shape, int32_t ndim) {
  auto* run = static_cast<RunContext*>(host_context);
  try {
    if (index >= run->outputs.size()) {
      return make_plugin_status(TSRP_INVALID_ARGUMENT, ("allocate_output: output index " + std::to_string(index) + " of " +
                                                        std::to_string(run->outputs.size())).c_str());
    }
    if (ndim < 0 || ndim > 64 || (ndim > 0 && !shape)) {
      return make_plugin_status(TSRP_INVALID_ARGUMENT, "allocate_output: bad rank or no shape");
    }
    Shape dims(shape, shape + ndim);
    int64_t numel = 1;
    for (int64_t d : dims) {
      if (d < 0 || (d > 0 && numel > (int64_t{1} << 40) / d)) {
        return make_plugin_status(TSRP_INVALID_ARGUMENT, "allocate_output: a dimension is negative or the size is too large");
      }
      numel *= d;
    }
    const ValueId id = run->region->outputs[index];
    const TensorType& declared = run->region->value(id).type;
    if (declared.rank_known && declared.dims.size() != dims.size()) {
      return make_plugin_status(TSRP_INVALID_ARGUMENT, ("allocate_output: output '" + run->region->value(id).name +
                                                        "' has rank " + std::to_string(declared.dims.size())).c_str());
    }
    TensorView& view = run->store->output(id);
    view.dtype = declared.dtype;
    view.shape = dims;
    run->store->allocate(id);
    run->output_shapes[index] = dims;
    DLTensor& t = run->outputs[index];
    t.data = run->store->output(id).data;
    t.ndim = ndim;
    t.shape = run->output_shapes[index].data();
    return nullptr;
  } catch (const std::exception& e) {
    return make_plugin_status(TSRP_INTERNAL, e.what());
  }
}

extern "C" void node_finished_callback(void* host_context, size_t node_index, double milliseconds) {
  auto* run = static_cast<RunContext*>(host_context);
  if (node_index < run->region->nodes.size()) run->store->node_finished(node_index, milliseconds);
}

class PluginRegion : public ExecutableRegion {
 public:
  PluginRegion(std::shared_ptr<const PluginLibrary> library, const Graph& region, std::unique_ptr<GraphView> view,
               tsrp_region* handle, bool device)
      : library_(std::move(library)), region_(region), view_(std::move(view)), handle_(handle), device_(device),
        where_("backend plug-in '" + library_->name + "': ") {
    serial_ = TSRP_MEMBER_OR(library_->api, serial_runs, 0) != 0;
  }
  ~PluginRegion() override { library_->api->release_region(handle_); }

  bool exact_only_for_finite_inputs() const override {
    auto finite_only = TSRP_MEMBER_OR(library_->api, finite_inputs_only, nullptr);
    return finite_only && finite_only(handle_) != 0;
  }

  void run(ValueStore& store) const override {
    RunContext run;
    run.store = &store;
    run.region = &region_;
    run.device = {device_ ? kDLExtDev : kDLCPU, 0};
    run.inputs.resize(region_.inputs.size());
    for (size_t k = 0; k < region_.inputs.size(); ++k) {
      const TensorView& view = store.get(region_.inputs[k]);
      run.inputs[k] = describe(view, run.device);
    }
    run.outputs.resize(region_.outputs.size());
    run.output_shapes.resize(region_.outputs.size());
    for (size_t k = 0; k < region_.outputs.size(); ++k) {
      const ValueId id = region_.outputs[k];
      TensorView& view = store.output(id);
      if (view.data) {
        run.output_shapes[k] = view.shape;
      } else {
        run.output_shapes[k] = region_.value(id).type.dims;  // -1 where known only at run time
        view.dtype = region_.value(id).type.dtype;
      }
      run.outputs[k] = describe(view, run.device);
      run.outputs[k].shape = run.output_shapes[k].data();
      run.outputs[k].ndim = static_cast<int32_t>(run.output_shapes[k].size());
    }
    tsrp_run_args args{};
    args.struct_size = sizeof(args);
    args.input_count = run.inputs.size();
    args.inputs = run.inputs.data();
    args.output_count = run.outputs.size();
    args.outputs = run.outputs.data();
    args.allocate_output = &allocate_output_callback;
    args.host_context = &run;
    args.node_finished = store.profiling() ? &node_finished_callback : nullptr;
    {
      std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
      if (serial_) lock.lock();
      throw_if_error(library_->api->run(handle_, &args), where_ + "run: ");
    }
    for (size_t k = 0; k < region_.outputs.size(); ++k) {
      const TensorView& view = store.output(region_.outputs[k]);
      if (!view.data && view.numel() != 0) {
        throw_internal_error(where_, "run returned without allocating output '", region_.value(region_.outputs[k]).name,
                             "' (its shape is known only at run time: call allocate_output)");
      }
    }
  }

 private:
  static DLTensor describe(const TensorView& view, DLDevice device) {
    DLTensor t{};
    t.data = view.data;
    t.device = device;
    t.ndim = static_cast<int32_t>(view.shape.size());
    t.dtype = dlpack_dtype(view.dtype);
    t.shape = const_cast<int64_t*>(view.shape.data());
    t.strides = nullptr;  // compact row-major
    t.byte_offset = 0;
    return t;
  }

  std::shared_ptr<const PluginLibrary> library_;
  const Graph& region_;
  std::unique_ptr<GraphView> view_;
  tsrp_region* handle_;
  bool device_;
  bool serial_ = false;
  std::string where_;
  mutable std::mutex mutex_;
};

class PluginBackend : public Backend {
 public:
  PluginBackend(std::shared_ptr<const PluginLibrary> library, const RegionOptions& options)
      : library_(std::move(library)), api_(*library_->api), where_("backend plug-in '" + library_->name + "': ") {
    tsrp_backend_options backend_options{};
    backend_options.struct_size = sizeof(backend_options);
    backend_options.num_threads = options.num_threads;
    throw_if_error(api_.create_backend(&backend_options, &handle_), where_ + "create_backend: ");
    if (!handle_) throw_internal_error(where_, "create_backend returned no backend");
    try {
      const char* compatibility = api_.compatibility(handle_);
      compatibility_ = compatibility ? compatibility : "";
      if (const tsrp_memory_space* space = api_.memory_space(handle_)) {
        if (space->struct_size < offsetof(tsrp_memory_space, copy_to_host) + sizeof(space->copy_to_host) ||
            !space->allocate || !space->deallocate || !space->copy_from_host || !space->copy_to_host) {
          throw_user_error(where_, "its memory space lacks allocate, deallocate or a copy function");
        }
        space_ = std::make_unique<PluginMemorySpace>(*space, where_);
      }
      read_declarations();
    } catch (...) {
      api_.destroy_backend(handle_);
      throw;
    }
  }
  ~PluginBackend() override { api_.destroy_backend(handle_); }

  std::string name() const override { return library_->name; }
  std::string version() const override { return library_->version; }
  std::string compatibility() const override { return compatibility_; }
  MemorySpace* memory_space() const override { return space_.get(); }
  const Declarations& declarations() const override { return declarations_; }
  bool opaque_regions() const override { return true; }

  CompiledRegion compile(const Graph& region, const RegionOptions& options) const override {
    auto view = std::make_unique<GraphView>(region);
    tsrp_payload payload{};
    payload.struct_size = sizeof(payload);
    throw_if_error(api_.compile(handle_, view->get(), &payload), where_ + "compile: ");
    CompiledRegion compiled;
    if (payload.size > 0 && payload.data) {
      const auto* bytes = static_cast<const uint8_t*>(payload.data);
      compiled.payload.assign(bytes, bytes + payload.size);
    }
    api_.free_payload(handle_, payload.owner);
    // Through load(), as an artifact would go: the path that always runs.
    compiled.executable = load(region, compiled.payload, options);
    return compiled;
  }

  std::unique_ptr<ExecutableRegion> load(const Graph& region, std::span<const uint8_t> payload,
                                         const RegionOptions&) const override {
    auto view = std::make_unique<GraphView>(region);
    tsrp_region* handle = nullptr;
    throw_if_error(api_.load(handle_, view->get(), payload.data(), payload.size(), &handle), where_ + "load: ");
    if (!handle) throw_internal_error(where_, "load returned no region");
    return std::make_unique<PluginRegion>(library_, region, std::move(view), handle, space_ != nullptr);
  }

 private:
  /// The view of `graph` (cached across the partitioner's calls: one graph,
  /// node after node) and the index of `node` in it. Call with view_mutex_ held.
  const tsrp_graph* view_of(const Graph& graph, const Node& node, size_t& index) const {
    const Node* first = graph.nodes.data();
    if (&node < first || &node >= first + graph.nodes.size()) {
      throw_internal_error(where_, "asked about node '", node.name, "', which is not in the graph it was given");
    }
    index = static_cast<size_t>(&node - first);
    // A graph at the same address may be another one: the node's name storage tells.
    if (viewed_graph_ != &graph || viewed_nodes_ != first || viewed_node_count_ != graph.nodes.size() ||
        viewed_value_count_ != graph.values.size() || view_->get()->nodes[index]->name != node.name.c_str()) {
      view_ = std::make_unique<GraphView>(graph);
      viewed_graph_ = &graph;
      viewed_nodes_ = first;
      viewed_node_count_ = graph.nodes.size();
      viewed_value_count_ = graph.values.size();
    }
    return view_->get();
  }

  /// The plug-in's answer for one node.
  SupportDecision support(const Graph& graph, const Node& node) const {
    std::lock_guard<std::mutex> lock(view_mutex_);
    size_t index = 0;
    const tsrp_graph* view = view_of(graph, node, index);
    char reason[512] = "";
    tsrp_support answer{};
    answer.struct_size = sizeof(answer);
    answer.reason = reason;
    answer.reason_capacity = sizeof(reason);
    throw_if_error(api_.support(handle_, view, index, &answer), where_ + "support: ");
    reason[sizeof(reason) - 1] = '\0';
    if (answer.supported) return {true, ""};
    return {false, reason[0] ? std::string(reason) : library_->name + " declines " + node.op_type + " (no reason given)"};
  }

  /// The plug-in's pattern_check for one node against one pattern entry.
  bool pattern_check(const Graph& graph, const Node& node, size_t pattern, size_t entry) const {
    std::lock_guard<std::mutex> lock(view_mutex_);
    size_t index = 0;
    const tsrp_graph* view = view_of(graph, node, index);
    return api_.pattern_check(handle_, view, pattern, entry, index) != 0;
  }

  void read_declarations() {
    declarations_.any_op([this](const Graph& graph, const Node& node) { return support(graph, node); });
    const NodePredicate supported = [this](const Graph& graph, const Node& node) {
      return support(graph, node).supported;
    };
    const size_t count = api_.pattern_count(handle_);
    if (count > 1024) throw_user_error(where_, "declares ", count, " patterns (at most 1024)");
    for (size_t i = 0; i < count; ++i) {
      const tsrp_pattern* pattern = api_.pattern(handle_, i);
      if (!pattern || pattern->struct_size < offsetof(tsrp_pattern, root) + sizeof(pattern->root) || !pattern->name ||
          !*pattern->name) {
        throw_user_error(where_, "pattern ", i, " is missing, too small or unnamed");
      }
      const std::string where = where_ + "pattern '" + pattern->name + "': ";
      std::function<NodePredicate(size_t)> checked;
      if (TSRP_MEMBER_OR(&api_, pattern_check, nullptr)) {
        checked = [this, i](size_t entry) -> NodePredicate {
          return [this, i, entry](const Graph& graph, const Node& node) { return pattern_check(graph, node, i, entry); };
        };
      }
      declarations_.pattern(pattern->name, read_plugin_pattern(*pattern, supported, checked, where));
    }
  }

  std::shared_ptr<const PluginLibrary> library_;
  const tsrp_plugin& api_;
  std::string where_;
  tsrp_backend* handle_ = nullptr;
  std::string compatibility_;
  std::unique_ptr<PluginMemorySpace> space_;
  Declarations declarations_;
  mutable std::mutex view_mutex_;
  mutable std::unique_ptr<GraphView> view_;
  mutable const Graph* viewed_graph_ = nullptr;
  mutable const Node* viewed_nodes_ = nullptr;
  mutable size_t viewed_node_count_ = 0;
  mutable size_t viewed_value_count_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_plugin_backend(std::shared_ptr<const PluginLibrary> library, const RegionOptions& options) {
  return std::make_unique<PluginBackend>(std::move(library), options);
}

}  // namespace tessera
