// export_backend.h: the plug-in side of the ABI over a C++ Backend. Every
// function catches what the backend throws and returns it as a status.
#include "backends/plugin_export/export_backend.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "backends/plugin_export/graph_from_view.h"
#include "ir/error.h"
#include "partition/declarations.h"

struct tsrp_backend {
  std::unique_ptr<tessera::Backend> backend;
  tessera::RegionOptions options;
  std::string compatibility;
  tsrp_memory_space space{};
  std::string space_name;
  bool has_space = false;
  // Patterns as data: per pattern, its entries, their input index lists and the Pattern handles
  // whose C++ conditions pattern_check evaluates.
  struct ExportedPattern {
    std::string name;
    std::vector<std::string> op_types;                    // per entry, joined with '|'
    std::vector<std::vector<int32_t>> inputs;             // per entry
    std::vector<tsrp_pattern_node> entries;
    std::vector<const tsrp_pattern_node*> entry_pointers;
    std::vector<tessera::Pattern> handles;                // per entry
    tsrp_pattern data{};
  };
  std::vector<std::unique_ptr<ExportedPattern>> patterns;
  // The Graph rebuilt from the last view support() or pattern_check() saw (the host asks node after node).
  std::mutex cache_mutex;
  const tsrp_graph* cached_view = nullptr;
  const char* cached_first_name = nullptr;
  size_t cached_nodes = 0;
  std::unique_ptr<tessera::Graph> cached_graph;
};

struct tsrp_region {
  tessera::Graph graph;  // declared first: the executable may point into it
  std::unique_ptr<tessera::ExecutableRegion> executable;
  tessera::MemorySpace* space = nullptr;
};

namespace tessera {
namespace {

const tsrp_host* g_host = nullptr;
std::string g_name, g_description;
std::function<std::unique_ptr<Backend>()> g_make;

tsrp_status* status_of_current_exception(const char* step) {
  try {
    throw;
  } catch (const Error& e) {
    const tsrp_status_code code = e.kind() == ErrorKind::kUser          ? TSRP_INVALID_ARGUMENT
                                  : e.kind() == ErrorKind::kUnsupported ? TSRP_UNSUPPORTED
                                                                        : TSRP_INTERNAL;
    return g_host->make_status(code, e.what());
  } catch (const std::exception& e) {
    return g_host->make_status(TSRP_INTERNAL, (std::string(step) + ": " + e.what()).c_str());
  } catch (...) {
    return g_host->make_status(TSRP_INTERNAL, (std::string(step) + ": unknown exception").c_str());
  }
}

/// A status the host handed over (allocate_output's), travelling up to run()'s return.
struct HostStatus {
  tsrp_status* status;
};

template <typename F>
tsrp_status* guarded(const char* step, F&& f) {
  try {
    f();
    return nullptr;
  } catch (const HostStatus& host) {
    return host.status;
  } catch (...) {
    return status_of_current_exception(step);
  }
}

// --- memory space ---
tsrp_status* space_allocate(void* context, size_t bytes, void** out) {
  return guarded("allocate", [&] { *out = static_cast<MemorySpace*>(context)->allocate(bytes); });
}
void space_deallocate(void* context, void* data) { static_cast<MemorySpace*>(context)->deallocate(data); }
tsrp_status* space_copy_from_host(void* context, void* dst, const void* src, size_t bytes) {
  return guarded("copy_from_host", [&] { static_cast<MemorySpace*>(context)->copy_from_host(dst, src, bytes); });
}
tsrp_status* space_copy_to_host(void* context, void* dst, const void* src, size_t bytes) {
  return guarded("copy_to_host", [&] { static_cast<MemorySpace*>(context)->copy_to_host(dst, src, bytes); });
}
tsrp_status* space_synchronize(void* context) {
  return guarded("synchronize", [&] { static_cast<MemorySpace*>(context)->synchronize(); });
}

// --- patterns as data ---
/// Appends the entries of `root`'s DAG to `out` (children first) and returns root's index.
int32_t export_entry(const Pattern& pattern, tsrp_backend::ExportedPattern& out, std::map<const void*, int32_t>& seen) {
  const PatternInfo info = describe_pattern(pattern);
  if (auto it = seen.find(info.identity); it != seen.end()) return it->second;
  std::vector<int32_t> inputs;
  for (const Pattern& input : info.inputs) inputs.push_back(export_entry(input, out, seen));
  tsrp_pattern_node entry{};
  entry.struct_size = sizeof(entry);
  std::string op_types;
  switch (info.kind) {
    case PatternInfo::Kind::kAny: entry.kind = TSRP_PATTERN_ANY; break;
    case PatternInfo::Kind::kConstant: entry.kind = TSRP_PATTERN_CONSTANT; break;
    case PatternInfo::Kind::kAbsent: entry.kind = TSRP_PATTERN_ABSENT; break;
    case PatternInfo::Kind::kScalar:
      entry.kind = TSRP_PATTERN_SCALAR;
      entry.scalar = info.scalar_value;
      entry.tolerance = info.tolerance;
      break;
    case PatternInfo::Kind::kEither: entry.kind = TSRP_PATTERN_EITHER; break;
    case PatternInfo::Kind::kOp:
      entry.kind = TSRP_PATTERN_OP;
      for (const std::string& t : info.op_types) op_types += (op_types.empty() ? "" : "|") + t;
      if (!info.check_inputs) inputs.clear();
      entry.flags = (info.commutative ? TSRP_PATTERN_COMMUTATIVE : 0u) | (info.has_conditions ? TSRP_PATTERN_CHECKED : 0u);
      break;
  }
  const int32_t index = static_cast<int32_t>(out.entries.size());
  entry.input_count = info.kind == PatternInfo::Kind::kOp && !info.check_inputs ? -1 : static_cast<int32_t>(inputs.size());
  out.op_types.push_back(std::move(op_types));
  out.inputs.push_back(std::move(inputs));
  out.entries.push_back(entry);
  out.handles.push_back(pattern);
  seen[info.identity] = index;
  return index;
}

void export_patterns(tsrp_backend& b) {
  for (const DeclaredPattern& declared : b.backend->declarations().patterns()) {
    auto p = std::make_unique<tsrp_backend::ExportedPattern>();
    p->name = declared.name;
    std::map<const void*, int32_t> seen;
    const int32_t root = export_entry(declared.root, *p, seen);
    // Only now do the vectors stop growing: point the entries at their strings and lists.
    for (size_t e = 0; e < p->entries.size(); ++e) {
      p->entries[e].op_types = p->op_types[e].empty() ? nullptr : p->op_types[e].c_str();
      p->entries[e].inputs = p->inputs[e].data();
      p->entry_pointers.push_back(&p->entries[e]);
    }
    p->data.struct_size = sizeof(tsrp_pattern);
    p->data.name = p->name.c_str();
    p->data.node_count = p->entries.size();
    p->data.nodes = p->entry_pointers.data();
    p->data.root = root;
    b.patterns.push_back(std::move(p));
  }
}

/// The Graph of `view`, rebuilt once while the host asks about its nodes one by one.
const Graph& graph_for(tsrp_backend& b, const tsrp_graph* view) {
  const char* first_name = view->node_count ? view->nodes[0]->name : nullptr;
  if (!b.cached_graph || b.cached_view != view || b.cached_nodes != view->node_count || b.cached_first_name != first_name) {
    b.cached_graph = std::make_unique<Graph>(graph_from_view(*view));
    b.cached_view = view;
    b.cached_nodes = view->node_count;
    b.cached_first_name = first_name;
  }
  return *b.cached_graph;
}

// --- the backend ---
tsrp_status* create_backend(const tsrp_backend_options* options, tsrp_backend** out) {
  return guarded("create_backend", [&] {
    auto b = std::make_unique<tsrp_backend>();
    b->backend = g_make();
    b->options.num_threads = options && options->num_threads > 0 ? options->num_threads : 1;
    b->compatibility = b->backend->compatibility();
    if (MemorySpace* space = b->backend->memory_space()) {
      b->has_space = true;
      b->space.struct_size = sizeof(tsrp_memory_space);
      b->space_name = space->name();
      b->space.name = b->space_name.c_str();
      b->space.context = space;
      b->space.allocate = space_allocate;
      b->space.deallocate = space_deallocate;
      b->space.copy_from_host = space_copy_from_host;
      b->space.copy_to_host = space_copy_to_host;
      b->space.synchronize = space_synchronize;
    }
    export_patterns(*b);
    *out = b.release();
  });
}

void destroy_backend(tsrp_backend* b) { delete b; }

const char* compatibility(tsrp_backend* b) { return b->compatibility.c_str(); }

const tsrp_memory_space* memory_space(tsrp_backend* b) { return b->has_space ? &b->space : nullptr; }

tsrp_status* support(tsrp_backend* b, const tsrp_graph* view, size_t node_index, tsrp_support* out) {
  return guarded("support", [&] {
    std::lock_guard<std::mutex> lock(b->cache_mutex);
    const Graph& graph = graph_for(*b, view);
    if (node_index >= graph.nodes.size()) throw_user_error("support: node index ", node_index, " out of range");
    const SupportDecision d = b->backend->declarations().supports(graph, graph.nodes[node_index]);
    out->supported = d.supported ? 1 : 0;
    if (!d.supported && out->reason && out->reason_capacity) {
      std::snprintf(out->reason, out->reason_capacity, "%s", d.reason.c_str());
    }
  });
}

size_t pattern_count(tsrp_backend* b) { return b->patterns.size(); }

const tsrp_pattern* pattern(tsrp_backend* b, size_t index) {
  return index < b->patterns.size() ? &b->patterns[index]->data : nullptr;
}

int32_t pattern_check(tsrp_backend* b, const tsrp_graph* view, size_t pattern_index, size_t entry_index, size_t node_index) {
  try {
    std::lock_guard<std::mutex> lock(b->cache_mutex);
    if (pattern_index >= b->patterns.size() || entry_index >= b->patterns[pattern_index]->handles.size()) return 0;
    const Graph& graph = graph_for(*b, view);
    if (node_index >= graph.nodes.size()) return 0;
    return pattern_conditions_hold(b->patterns[pattern_index]->handles[entry_index], graph, graph.nodes[node_index]) ? 1 : 0;
  } catch (...) {
    return 0;  // a condition that throws does not hold
  }
}

tsrp_status* compile(tsrp_backend* b, const tsrp_graph* region, tsrp_payload* out) {
  return guarded("compile", [&] {
    const Graph graph = graph_from_view(*region);
    auto* bytes = new std::vector<uint8_t>(b->backend->compile(graph, b->options).payload);
    out->data = bytes->data();
    out->size = bytes->size();
    out->owner = bytes;
  });
}

void free_payload(tsrp_backend*, void* owner) { delete static_cast<std::vector<uint8_t>*>(owner); }

tsrp_status* load(tsrp_backend* b, const tsrp_graph* view, const void* payload, size_t size, tsrp_region** out) {
  return guarded("load", [&] {
    auto region = std::make_unique<tsrp_region>();
    region->graph = graph_from_view(*view);
    region->executable = b->backend->load(region->graph, {static_cast<const uint8_t*>(payload), size}, b->options);
    region->space = b->backend->memory_space();
    *out = region.release();
  });
}

void release_region(tsrp_region* region) { delete region; }

int32_t finite_inputs_only(tsrp_region* region) { return region->executable->exact_only_for_finite_inputs() ? 1 : 0; }

DType dtype_of(const DLDataType& t) {
  if (t.lanes != 1) throw_user_error("vector dtypes are not supported");
  for (DType d : {DType::kFloat32, DType::kFloat16, DType::kFloat64, DType::kBFloat16, DType::kInt8, DType::kInt16,
                  DType::kInt32, DType::kInt64, DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64}) {
    const bool is_float = d == DType::kFloat32 || d == DType::kFloat16 || d == DType::kFloat64;
    const uint8_t code = d == DType::kBFloat16 ? kDLBfloat : is_float ? kDLFloat : dtype_is_signed(d) ? kDLInt : kDLUInt;
    if (t.code == code && t.bits == dtype_size(d) * 8) return d;
  }
  if (t.code == 6 && t.bits == 8) return DType::kBool;  // DLPack 0.8's kDLBool
  throw_user_error("DLPack dtype code ", int(t.code), " bits ", int(t.bits), " has no Tessera dtype");
}

/// The ValueStore a C++ backend runs against: region inputs and outputs are
/// run()'s tensors; values in between live in allocations of this store (in
/// the backend's memory space, or host memory), freed when it ends.
class DlpackStore : public ValueStore {
 public:
  DlpackStore(const tsrp_region& region, const tsrp_run_args& args)
      : region_(region), args_(args), views_(region.graph.values.size()), owned_(region.graph.values.size(), 0),
        output_index_(region.graph.values.size(), -1) {
    const Graph& g = region.graph;
    for (size_t i = 0; i < g.values.size(); ++i) {
      const Value& v = g.values[i];
      if (v.constant) {
        views_[i] = v.constant->view();
      } else {
        views_[i].dtype = v.type.dtype;
        if (v.type.is_static()) views_[i].shape = v.type.dims;
      }
    }
    for (size_t k = 0; k < g.inputs.size(); ++k) views_[static_cast<size_t>(g.inputs[k])] = view_of(args.inputs[k]);
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      const size_t id = static_cast<size_t>(g.outputs[k]);
      output_index_[id] = static_cast<int64_t>(k);
      if (args.outputs[k].data) views_[id] = view_of(args.outputs[k]);
    }
  }
  ~DlpackStore() override {
    for (size_t i = 0; i < views_.size(); ++i) {
      if (!owned_[i]) continue;
      if (region_.space) region_.space->deallocate(views_[i].data);
      else std::free(views_[i].data);
    }
  }

  const TensorView& get(ValueId id) override { return views_[static_cast<size_t>(id)]; }
  TensorView& output(ValueId id) override {
    TensorView& v = views_[static_cast<size_t>(id)];
    if (!v.data && region_.graph.value(id).type.is_static()) allocate(id);
    return v;
  }
  void allocate(ValueId id) override {
    TensorView& v = views_[static_cast<size_t>(id)];
    const int64_t k = output_index_[static_cast<size_t>(id)];
    if (k >= 0) {  // a region output: the host allocates it
      if (!TSRP_HAS_MEMBER(&args_, tsrp_run_args, host_context) || !args_.allocate_output) {
        throw_user_error("run: output ", k, " has a shape known only now, and the host's run arguments ("
                         , args_.struct_size, " bytes) offer no allocate_output");
      }
      tsrp_status* status = args_.allocate_output(args_.host_context, static_cast<size_t>(k), v.shape.data(),
                                                  static_cast<int32_t>(v.shape.size()));
      if (status) throw HostStatus{status};
      v.data = args_.outputs[k].data;
      return;
    }
    if (owned_[static_cast<size_t>(id)]) {
      if (region_.space) region_.space->deallocate(v.data);
      else std::free(v.data);
    }
    const size_t bytes = std::max<size_t>(v.nbytes(), 1);
    v.data = region_.space ? region_.space->allocate(bytes) : std::aligned_alloc(64, (bytes + 63) / 64 * 64);
    if (!v.data) throw_internal_error("out of memory for '", region_.graph.value(id).name, "'");
    owned_[static_cast<size_t>(id)] = 1;
  }
  // An older host's run args may end before node_finished: read it only where they hold it.
  bool profiling() const override {
    return TSRP_HAS_MEMBER(&args_, tsrp_run_args, node_finished) && args_.node_finished != nullptr;
  }
  void node_finished(size_t node_index, double milliseconds) override {
    args_.node_finished(args_.host_context, node_index, milliseconds);
  }

 private:
  static TensorView view_of(const DLTensor& t) {
    TensorView v;
    v.dtype = dtype_of(t.dtype);
    v.shape.assign(t.shape, t.shape + t.ndim);
    v.data = static_cast<char*>(t.data) + t.byte_offset;
    return v;
  }

  const tsrp_region& region_;
  const tsrp_run_args& args_;
  std::vector<TensorView> views_;
  std::vector<char> owned_;
  std::vector<int64_t> output_index_;
};

tsrp_status* run(tsrp_region* region, const tsrp_run_args* args) {
  return guarded("run", [&] {
    if (!args || !TSRP_HAS_MEMBER(args, tsrp_run_args, outputs)) {
      throw_user_error("run: the host's run arguments are too small to hold the inputs and outputs");
    }
    if (args->input_count != region->graph.inputs.size() || args->output_count != region->graph.outputs.size()) {
      throw_user_error("run: ", args->input_count, " inputs and ", args->output_count, " outputs for a region of ",
                       region->graph.inputs.size(), " and ", region->graph.outputs.size());
    }
    DlpackStore store(*region, *args);
    region->executable->run(store);
  });
}

}  // namespace

const tsrp_plugin* export_backend_as_plugin(const tsrp_host* host, const char* name, const char* description,
                                            std::function<std::unique_ptr<Backend>()> make) {
  if (!host || host->abi_major != TSRP_ABI_MAJOR) return nullptr;
  static tsrp_plugin table{};
  static std::once_flag once;
  std::call_once(once, [&] {
    g_host = host;
    g_name = name;
    g_description = description;
    g_make = std::move(make);
    const std::unique_ptr<Backend> probe = g_make();
    static std::string version = probe->version();
    table.struct_size = sizeof(tsrp_plugin);
    table.abi_major = TSRP_ABI_MAJOR;
    table.abi_minor = TSRP_ABI_MINOR;
    table.name = g_name.c_str();
    table.version = version.c_str();
    table.description = g_description.c_str();
    table.create_backend = create_backend;
    table.destroy_backend = destroy_backend;
    table.compatibility = compatibility;
    table.memory_space = memory_space;
    table.support = support;
    table.pattern_count = pattern_count;
    table.pattern = pattern;
    table.compile = compile;
    table.free_payload = free_payload;
    table.load = load;
    table.release_region = release_region;
    table.run = run;
    table.serial_runs = 0;
    table.pattern_check = pattern_check;
    table.finite_inputs_only = finite_inputs_only;
  });
  return &table;
}

}  // namespace tessera
