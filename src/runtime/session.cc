// The compile pipeline and running a compiled model (artifact save/load: session_artifact.cc).
#include "runtime/session.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "backends/native/native_backend.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/shape_util.h"
#include "ir/specialize_shapes.h"
#include "ir/verifier.h"
#include "partition/declarations.h"
#include "partition/pattern.h"
#include "passes/bind_input_shapes.h"
#include "passes/bind_input_values.h"
#include "passes/float16_compute.h"
#include "passes/fold_qdq.h"
#include "passes/infer_and_fold.h"
#include "passes/inline_constant_if.h"
#include "passes/unroll_constant_loop.h"
#include "passes/fold_pad.h"
#include "passes/remove_no_ops.h"
#include "passes/transpose_as_reshape.h"
#include "passes/trim_conv_taps.h"
#include "runtime/backend_registry.h"
#include "runtime/compiled_body.h"
#include "runtime/idle_spinners.h"
#include "runtime/finite_scan.h"
#include "runtime/region_key.h"
#include "runtime/region_plan.h"
#include "runtime/tuning_record.h"

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

/// Dumps the graph when asked and, where the graph is complete (`verify`),
/// checks its invariants. infer_and_fold leaves folded nodes in place until
/// eliminate_dead_nodes removes them, so the graph is only checked after that.
void after_pass(const Graph& graph, const char* pass, bool verify = true) {
  if (dump_after_each_pass()) std::cerr << "// after " << pass << "\n" << print_graph(graph);
  if (verify && verify_between_passes()) {
    try {
      verify_graph(graph);
    } catch (const Error& e) {
      throw_internal_error("after pass ", pass, ": ", e.what());
    }
  }
}

/// The backends to partition among, highest priority first.
std::vector<std::unique_ptr<Backend>> choose_backends(const CompileOptions& options) {
  std::vector<std::string> names = options.backends;
  if (names.empty()) {
    for (const BackendEntry* entry : all_backends()) {
      if (entry->used_by_default) names.push_back(entry->name);
    }
  }
  std::set<std::string> seen;
  for (const std::string& name : names) {
    if (!find_backend(name)) {
      throw_user_error("unknown backend '", name, "' (known: ", known_backend_names(),
                       "; a plug-in backend is loaded with --backend-plugin PATH or TESSERA_BACKEND_PLUGINS)");
    }
    if (!seen.insert(name).second) throw_user_error("backend '", name, "' is listed twice");
  }
  const std::string& fallback = fallback_backend().name;
  if (!options.strict && !seen.count(fallback)) names.push_back(fallback);
  RegionOptions region_options;
  region_options.num_threads = options.num_threads;
  std::vector<std::unique_ptr<Backend>> backends;
  for (const std::string& name : names) backends.push_back(find_backend(name)->make(region_options));
  return backends;
}

std::string composite_text(const Graph& graph, const Composite& composite) {
  std::string text = composite.pattern + ":";
  for (size_t k = 0; k < composite.nodes.size(); ++k) text += (k ? ", " : " ") + graph.nodes[composite.nodes[k]].name;
  return text;
}

}  // namespace

CompiledModel::CompiledModel() : body_records_(std::make_shared<BodyRecords>()) {}
CompiledModel::~CompiledModel() {
  // Executable regions may point into region graphs and backends: drop them first.
  regions_.clear();
}

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
        pool_ = std::move(model.free_pools_.back());  // given back together with its arena
        model.free_pools_.pop_back();
        store_ = std::move(model.free_stores_.back());
        model.free_stores_.pop_back();
      }
    }
    if (!buffer_) buffer_ = std::make_unique<Buffer>(static_cast<size_t>(model.memory_plan_.arena_bytes), false);
    if (!store_) store_ = std::make_unique<RunStore>(model.graph_);
  }
  ~ArenaLease() {
    store_->end();  // (its pool buffers go back to pool_ first)
    std::lock_guard<std::mutex> lock(model_.arena_mutex_);
    model_.free_arenas_.push_back(std::move(buffer_));
    model_.free_pools_.push_back(std::move(pool_));
    model_.free_stores_.push_back(std::move(store_));
  }
  Buffer& buffer() { return *buffer_; }
  /// Memory for values of shapes known only at run time (RunStore's pool).
  BufferPool* pool() { return &pool_; }
  /// The run's value store, started on this lease's arena and pool.
  RunStore& start_store(bool poison, const std::vector<size_t>* bounded_bytes) {
    store_->begin(model_.memory_plan_, *buffer_, poison, &pool_, bounded_bytes);
    return *store_;
  }

 private:
  const CompiledModel& model_;
  std::unique_ptr<Buffer> buffer_;
  BufferPool pool_;
  std::unique_ptr<RunStore> store_;  // kept with the arena: its views' memory is reused run after run
};

std::unique_ptr<CompiledModel> CompiledModel::compile(Graph graph, const CompileOptions& given_options) {
  // Measurements while compiling (algorithms, per-step threads) see the cores as runs will.
  const IdleSpinScope idle_spinners(given_options.num_threads);
  std::unique_ptr<CompiledModel> model(new CompiledModel());
  after_pass(graph, "import");
  for (const Value& v : graph.values) {
    if (v.constant) model->parameter_count_ += v.constant->numel();
  }
  // The names the model gives its outputs' open dims (shape inference does not carry names): put back
  // on the outputs after the passes, where a dim is still open.
  std::vector<std::vector<std::string>> declared_output_symbols;
  for (ValueId id : graph.outputs) declared_output_symbols.push_back(graph.value(id).type.symbols);
  const std::string open_fingerprint = graph_fingerprint(graph);  // a tuning record of the open-dims plan
  bind_input_shapes(graph, given_options.input_shapes);
  after_pass(graph, "bind_input_shapes");
  if (!given_options.input_values.empty()) {
    bind_input_values(graph, given_options.input_values);
    after_pass(graph, "bind_input_values");
  }
  if (compute_float16_in_float32(graph) > 0) after_pass(graph, "compute_float16_in_float32");
  model->fingerprint_ = graph_fingerprint(graph);
  CompileOptions options = given_options;
  size_t tuned_places = 0;  // the entries at the end of options.place that the record put there
  if (given_options.tuning) {
    const TuningRecord& record = *given_options.tuning;
    bool applied = false;
    const size_t before = options.place.size();
    std::vector<std::string> warnings =
        apply_tuning(record, model->fingerprint_, open_fingerprint, input_shapes_text(graph), options, &applied);
    tuned_places = options.place.size() - before;
    model->warnings_.insert(model->warnings_.end(), warnings.begin(), warnings.end());
    if (applied) {
      model->tuning_ = given_options.tuning;
      graph.metadata["tessera.tuning"] = str_cat("tuned placement '", record.chosen, "' (", record.tuned_milliseconds, " ms against ",
                                                 record.default_milliseconds, " ms by default, ", record.threads, " threads, ",
                                                 record.cpu, ")");
    }
  }
  std::vector<QdqFold> qdq_folds;
  if (fold_qdq(graph, &qdq_folds) > 0) after_pass(graph, "fold_qdq");
  std::vector<std::pair<std::string, std::string>> nodes_before;  // name, op
  for (const Node& node : graph.nodes) nodes_before.emplace_back(node.name, node.op_type);
  infer_and_fold(graph, evaluate_node_natively);
  after_pass(graph, "infer_and_fold", /*verify=*/false);
  // An If whose condition folded to a constant: its branch's nodes in its place, then folded with the rest
  // (a branch may hold another such If).
  // A Loop of a constant trip count that cannot end early: its body's nodes, once per trip.
  std::vector<InlinedIf> inlined_ifs;
  std::vector<UnrolledLoop> unrolled_loops;
  for (;;) {
    std::vector<InlinedIf> ifs = inline_constant_if(graph);
    std::vector<UnrolledLoop> loops = unroll_constant_loops(graph);
    if (ifs.empty() && loops.empty()) break;
    inlined_ifs.insert(inlined_ifs.end(), ifs.begin(), ifs.end());
    unrolled_loops.insert(unrolled_loops.end(), loops.begin(), loops.end());
    infer_and_fold(graph, evaluate_node_natively);
    after_pass(graph, loops.empty() ? "inline_constant_if" : "unroll_constant_loop", /*verify=*/false);
  }
  eliminate_dead_nodes(graph);
  after_pass(graph, "eliminate_dead_nodes");
  const std::vector<RemovedNode> no_ops = remove_no_ops(graph);
  if (!no_ops.empty()) after_pass(graph, "remove_no_ops");
  if (!fold_pad(graph).empty()) {
    eliminate_dead_nodes(graph);
    after_pass(graph, "fold_pad");
  }
  if (!trim_conv_taps(graph).empty()) after_pass(graph, "trim_conv_taps");
  const std::vector<std::string> views = transpose_as_reshape(graph);
  if (!views.empty()) after_pass(graph, "transpose_as_reshape");

  for (size_t i = 0; i < graph.outputs.size() && i < declared_output_symbols.size(); ++i) {
    TensorType& t = graph.value(graph.outputs[i]).type;
    const std::vector<std::string>& declared = declared_output_symbols[i];
    if (!t.rank_known || declared.size() != t.dims.size()) continue;
    t.symbols.assign(t.dims.size(), "");
    for (size_t d = 0; d < t.dims.size(); ++d) {
      if (t.dims[d] < 0) t.symbols[d] = declared[d];
    }
  }

  // Partition among the chosen backends, then compile each region.
  model->backends_ = choose_backends(options);
  std::vector<PartitionBackend> partition_backends;
  PartitionPolicy policy;
  for (size_t b = 0; b < model->backends_.size(); ++b) {
    partition_backends.push_back({model->backends_[b]->name(), &model->backends_[b]->declarations()});
    if (model->backends_[b]->name() == fallback_backend().name) policy.fallback = static_cast<int>(b);
  }
  // A record of the open-dims plan applied to a compile that binds the shapes: the shape computations
  // it placed were folded here.
  if (tuned_places > 0) {
    std::set<std::string> present;
    for (const Node& node : graph.nodes) present.insert(node.name);
    auto first = options.place.end() - static_cast<std::ptrdiff_t>(tuned_places);
    options.place.erase(std::remove_if(first, options.place.end(), [&](const auto& p) { return !present.count(p.first); }),
                        options.place.end());
  }
  policy.place = options.place;
  policy.deny = options.deny;
  policy.min_region_size = options.min_region_size;
  policy.strict = options.strict;
  // The probe (RegionOptions::probe_input_dims): with open dims, every value's dims when each open
  // input dim is kProbeDim, inferred over the whole model with its shape computations folded (a
  // reshape to a computed shape gets its dims), on a copy. Where that fails nothing is probed.
  std::vector<Shape> probe_dims;  // per value; empty: not known
  if (!all_shapes_static(graph)) {
    try {
      Graph probe = graph;
      for (ValueId id : probe.inputs) {
        TensorType& t = probe.value(id).type;
        if (!t.is_tensor() || !t.rank_known) continue;
        for (int64_t& d : t.dims) d = d < 0 ? kProbeDim : d;
      }
      infer_and_fold(probe, evaluate_node_natively);
      probe_dims.resize(probe.values.size());
      for (size_t v = 0; v < probe.values.size(); ++v) {
        if (probe.values[v].type.is_static()) probe_dims[v] = probe.values[v].type.dims;
      }
    } catch (const Error&) {
      probe_dims.clear();
    }
  }
  model->graph_ = std::move(graph);
  std::vector<char> final_layer;
  std::vector<char> bf16;  // per node of the last partitioning's order
  RegionOptions region_options;
  region_options.num_threads = options.num_threads;
  // Partition, then compile each region. A backend may refuse a node it
  // claimed once it compiles it (ExecutableRegion::node_refusal: e.g. its
  // library has only a slow reference kernel there): the graph is partitioned
  // again without it, and compiled again, until no new refusal comes (a node
  // that --place or a tuning record puts there stays, with a warning).
  // The bodies of If and Loop nodes that native prepares here compile as models of their own, with these options.
  const native::ScopedBodyCompiler body_compiler(make_body_compiler(options, model->body_records_));
  // Each round's compiled regions by what they were compiled from (region_key.h): a region that comes
  // back unchanged in the next round is taken from there, with its graph (which its executable reads),
  // under the new round's global numbering.
  std::vector<std::string> region_keys;
  for (;;) {
    ++model->compile_rounds_.rounds;
    std::map<std::string, std::unique_ptr<RegionPlan>> compiled_before;
    for (size_t r = 0; r < model->regions_.size(); ++r) compiled_before.emplace(region_keys[r], std::move(model->regions_[r]));
    model->regions_.clear();
    region_keys.clear();
    model->partition_ = partition_graph(model->graph_, partition_backends, policy);
    order_nodes_by_region(model->graph_, model->partition_);
    after_pass(model->graph_, "partition");
    bf16 = bf16_nodes(model->graph_, options.precision, &final_layer);
    const size_t num_regions = model->partition_.regions.size();
    std::vector<std::unique_ptr<RegionPlan>> plans(num_regions);
    std::vector<RegionGraph> extracted(num_regions);
    std::vector<RegionOptions> options_of(num_regions, region_options);
    std::vector<std::string> keys(num_regions);
    for (size_t r = 0; r < num_regions; ++r) {
      const Region& region = model->partition_.regions[r];
      extracted[r] = extract_region(model->graph_, region);
      RegionOptions& options_here = options_of[r];
      if (!probe_dims.empty()) {
        for (ValueId local : extracted[r].graph.inputs) {
          options_here.probe_input_dims.push_back(probe_dims[static_cast<size_t>(extracted[r].global_value[static_cast<size_t>(local)])]);
        }
      }
      if (options.precision.bf16) {
        options_here.bf16_nodes.assign(extracted[r].graph.nodes.size(), 0);
        for (size_t i = 0; i < extracted[r].global_nodes.size(); ++i) {
          for (size_t node : extracted[r].global_nodes[i]) options_here.bf16_nodes[i] |= bf16[node];
        }
      }
      keys[r] = region_compile_key(model->backends_[region.backend]->name(), extracted[r].graph, options_here);
      if (auto found = compiled_before.find(keys[r]); found != compiled_before.end()) {
        plans[r] = std::move(found->second);
        compiled_before.erase(found);
        plans[r]->region.global_value = std::move(extracted[r].global_value);
        plans[r]->region.global_nodes = std::move(extracted[r].global_nodes);
        ++model->compile_rounds_.regions_reused;
      }
    }
    // What the new partition no longer has goes before anything is compiled (a decoder's native regions
    // of the first round held a packed copy of their weights while the second packed them again).
    compiled_before.clear();
    auto compile = [&](size_t r) {
      auto plan = std::make_unique<RegionPlan>();
      plan->backend = model->backends_[model->partition_.regions[r].backend].get();
      plan->region = std::move(extracted[r]);
      plan->fallback_options = region_options;
      CompiledRegion compiled = plan->backend->compile(plan->region.graph, options_of[r]);
      plan->payload_owned = std::move(compiled.payload);
      plan->payload = plan->payload_owned;
      plan->executable = std::move(compiled.executable);
      ++model->compile_rounds_.regions_compiled;
      plans[r] = std::move(plan);
    };
    // Whether a compiled region refused a node not refused before (recorded in the policy).
    auto new_refusals = [&] {
      const size_t known = policy.compile_refusals.size();
      for (const std::unique_ptr<RegionPlan>& plan : plans) {
        if (!plan) continue;
        for (size_t i = 0; i < plan->region.global_nodes.size(); ++i) {
          const std::string why = plan->executable->node_refusal(i);
          if (why.empty()) continue;
          // A fused node's refusal names its first member (members are in topological order: the
          // convolution or matmul the chain grew from); the rest may fuse again, elsewhere or on this backend.
          const std::string& name = model->graph_.nodes[plan->region.global_nodes[i].front()].name;
          bool seen = false;
          for (const CompileRefusal& r : policy.compile_refusals) seen |= r.backend == plan->backend->name() && r.node == name;
          if (!seen) policy.compile_refusals.push_back({plan->backend->name(), name, why});
        }
      }
      return policy.compile_refusals.size() != known;
    };
    // The backends that may refuse nodes first; the fallback backend's regions only once no new refusal
    // came, since a refusal partitions again and changes them (packing a decoder's 650 MB of weights
    // for regions the next round replaced cost a second copy of them at the peak, and the time).
    for (size_t r = 0; r < num_regions; ++r) {
      if (!plans[r] && static_cast<int>(model->partition_.regions[r].backend) != policy.fallback) compile(r);
    }
    bool again = new_refusals();
    if (!again) {
      for (size_t r = 0; r < num_regions; ++r) {
        if (!plans[r]) compile(r);
      }
      again = new_refusals();
    }
    for (size_t r = 0; r < num_regions; ++r) {
      if (!plans[r]) continue;
      plans[r]->backend_index = model->partition_.regions[r].backend;
      region_keys.push_back(std::move(keys[r]));
      model->regions_.push_back(std::move(plans[r]));
    }
    if (!again) break;
  }

  // Placement: every executed node (graph order, as profiles use), then the folded ones.
  const Graph& g = model->graph_;
  std::set<std::string> executed;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const size_t r = model->partition_.region_of_node[i];
    model->placement_.push_back({g.nodes[i].name, g.nodes[i].op_type, model->partition_.backends[model->partition_.regions[r].backend],
                                 "", static_cast<int64_t>(r), model->partition_.decisions[i].why});
    executed.insert(g.nodes[i].name);
  }
  for (NodePlacement& p : model->placement_) {
    if (std::find(views.begin(), views.end(), p.node_name) != views.end()) {
      p.note = "a Transpose that moves only dims of size 1: runs as a Reshape (a view, no copy)";
    }
  }
  for (const Region& region : model->partition_.regions) {
    for (const Composite& composite : region.composites) {
      const std::string& first = g.nodes[composite.nodes.front()].name;
      model->placement_[composite.nodes.front()].note = "pattern " + composite_text(g, composite);
      for (size_t k = 1; k < composite.nodes.size(); ++k) {
        model->placement_[composite.nodes[k]].note = "fused into '" + first + "' (pattern " + composite.pattern + ")";
      }
    }
  }
  for (const RemovedNode& removed : no_ops) {
    model->placement_.push_back({removed.node, removed.op_type, "folded", removed.why, -1, ""});
    executed.insert(removed.node);
  }
  for (const InlinedIf& i : inlined_ifs) {
    model->placement_.push_back({i.node, "If", "folded", str_cat("its condition is a constant: the ", i.branch ? "then" : "else",
                                 " branch's nodes run in its place, named '", i.node, "/...'"), -1, ""});
    executed.insert(i.node);
  }
  for (const UnrolledLoop& l : unrolled_loops) {
    model->placement_.push_back({l.node, "Loop", "folded", str_cat("its trip count is a constant: the body's nodes run ", l.trips,
                                 " times in its place, named '", l.node, "/<trip>/...'"), -1, ""});
    executed.insert(l.node);
  }
  for (const auto& [name, op_type] : nodes_before) {
    if (!executed.count(name)) model->placement_.push_back({name, op_type, "folded", "computed at compile time", -1, ""});
  }
  for (const QdqFold& fold : qdq_folds) {
    model->placement_.push_back({fold.node, fold.op_type, "folded", "folded into the quantized op '" + fold.into + "'", -1, ""});
  }
  model->read_node_precisions();
  if (options.precision.bf16) {
    // Why each Conv/MatMul/Gemm that stays float32 does; a warning when none runs bf16.
    size_t reduced = 0, candidates = 0;
    std::string refusals;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      NodePlacement& row = model->placement_[i];
      if (!is_bf16_compute_op(g.nodes[i])) continue;
      ++candidates;
      if (!row.precision.empty()) {
        ++reduced;
      } else if (final_layer[i]) {
        row.precision_note = "final layer kept in float32 (--precision bf16-all includes it)";
      } else if (!bf16[i]) {
        row.precision_note = "operands are not float32";
      } else {
        const Backend& backend = *model->backends_[model->partition_.regions[model->partition_.region_of_node[i]].backend];
        const std::string refusal = backend.bf16_refusal();
        row.precision_note =
            refusal.empty() ? "its backend kept it in float32 (measured faster in float32, or no bf16 implementation)" : refusal;
        if (!refusal.empty() && refusals.find(refusal) == std::string::npos) refusals += (refusals.empty() ? "" : "; ") + refusal;
      }
    }
    if (reduced == 0 && candidates > 0) {
      model->warnings_.push_back("--precision " + precision_text(options.precision) +
                                 ": no node runs in bfloat16, the model runs in float32" +
                                 (refusals.empty() ? std::string() : " (" + refusals + ")"));
    }
  }
  model->num_threads_ = options.num_threads;
  if (std::string w = thread_count_warning(options.num_threads); !w.empty()) model->warnings_.push_back(std::move(w));
  model->finish();
  model->apply_dim_bounds(options.dim_bounds);
  return model;
}

void CompiledModel::read_node_precisions() {
  // (An artifact's stored notes already hold what its regions say again at load.)
  auto add_note = [](NodePlacement& row, const std::string& text) {
    if (row.note.find(text) == std::string::npos) row.note += (row.note.empty() ? "" : "; ") + text;
  };
  for (const std::unique_ptr<RegionPlan>& plan : regions_) {
    for (size_t i = 0; i < plan->region.global_nodes.size(); ++i) {
      // A refusal the backend made when compiling, for a node it runs all the same (placed there by
      // --place or a tuning record, or loaded from an artifact): in its note and the warnings.
      // A fused node's refusal and algorithm are its first member's (the convolution or matmul).
      if (const std::string refusal = plan->executable->node_refusal(i); !refusal.empty()) {
        const size_t node = plan->region.global_nodes[i].front();
        NodePlacement& row = placement_[node];
        add_note(row, refusal);
        warnings_.push_back(str_cat("node '", row.node_name, "' (", row.op_type, ") runs on ", row.backend, ", which refused it: ", refusal));
      }
      if (const std::string algorithm = plan->executable->node_algorithm(i); !algorithm.empty()) {
        add_note(placement_[plan->region.global_nodes[i].front()], algorithm);
      }
      if (std::vector<InnerNodePlacement> inner = plan->executable->node_inner_placement(i); !inner.empty()) {
        const size_t row = plan->region.global_nodes[i].front();
        if (inner_placement_.size() <= row) inner_placement_.resize(row + 1);
        inner_placement_[row] = std::move(inner);
      }
      const std::string precision = plan->executable->node_precision(i);
      if (precision.empty()) continue;
      for (size_t node : plan->region.global_nodes[i]) {
        if (is_bf16_compute_op(graph_.nodes[node])) placement_[node].precision = precision;
      }
    }
  }
}


namespace {

/// The CPUs this process may run on (its affinity mask; the online count where that is unknown).
int usable_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

}  // namespace

std::string thread_count_warning(int num_threads) {
  const int cpus = usable_cpus();
  if (num_threads <= cpus) return "";
  return "--threads " + std::to_string(num_threads) + " is more than the " + std::to_string(cpus) +
         " CPUs this process may use: the threads take turns on them and every parallel step waits for the "
         "slowest, so runs get slower, not faster; use at most " + std::to_string(cpus);
}

const std::vector<InnerNodePlacement>& CompiledModel::inner_placement(size_t row) const {
  static const std::vector<InnerNodePlacement> kNone;
  return row < inner_placement_.size() ? inner_placement_[row] : kNone;
}

void CompiledModel::finish() {
  fixed_input_values_ = bound_input_values(graph_);
  find_cache_pairs();
  {
    // The last region to read (or make) each value passed between regions.
    std::vector<int64_t> last(graph_.values.size(), -1);
    for (size_t r = 0; r < regions_.size(); ++r) {
      const RegionGraph& rg = regions_[r]->region;
      for (ValueId local : rg.graph.inputs) last[static_cast<size_t>(rg.global_value[static_cast<size_t>(local)])] = static_cast<int64_t>(r);
      for (ValueId local : rg.graph.outputs) {
        const ValueId id = rg.global_value[static_cast<size_t>(local)];
        last[static_cast<size_t>(id)] = std::max(last[static_cast<size_t>(id)], static_cast<int64_t>(r));
      }
    }
    for (ValueId id : graph_.inputs) last[static_cast<size_t>(id)] = -1;
    for (ValueId id : graph_.outputs) last[static_cast<size_t>(id)] = -1;
    release_after_region_.assign(regions_.size(), {});
    for (size_t id = 0; id < last.size(); ++id) {
      if (last[id] >= 0 && !graph_.values[id].constant) {
        release_after_region_[static_cast<size_t>(last[id])].push_back(static_cast<ValueId>(id));
      }
    }
  }
  const Graph& g = graph_;
  const size_t num_values = g.values.size();
  // Which region produces each value, and in which memory space each region runs.
  std::vector<int64_t> producer_region(num_values, -1);
  for (size_t r = 0; r < regions_.size(); ++r) {
    RegionPlan& plan = *regions_[r];
    plan.space = plan.backend->memory_space();
    for (size_t node : partition_.regions[r].nodes) {
      for (ValueId out : g.nodes[node].outputs) {
        if (out != kNoValue) producer_region[static_cast<size_t>(out)] = static_cast<int64_t>(r);
      }
    }
  }
  std::vector<char> graph_output(num_values, 0);
  for (ValueId id : g.outputs) graph_output[static_cast<size_t>(id)] = 1;
  // Spaces that read each value, outside the region that makes it.
  std::vector<std::vector<const MemorySpace*>> read_in(num_values);
  std::vector<char> read_on_host(num_values, 0);
  for (size_t r = 0; r < regions_.size(); ++r) {
    for (ValueId in : partition_.regions[r].inputs) {
      const MemorySpace* space = regions_[r]->space;
      if (!space) read_on_host[static_cast<size_t>(in)] = 1;
      else read_in[static_cast<size_t>(in)].push_back(space);
    }
  }

  std::vector<std::set<const MemorySpace*>> copied_into(num_values);  // spaces a host value was copied into and kept
  // Values that live in host memory get arena offsets: every value of a host
  // region, and device outputs that are copied back.
  std::vector<char> on_host(num_values, 0);
  copies_per_run_ = 0;
  copy_bytes_per_run_ = 0;
  auto bytes_of = [&](ValueId id) -> int64_t {
    const TensorType& t = g.value(id).type;
    return t.is_static() ? shape_numel(t.dims) * static_cast<int64_t>(dtype_size(t.dtype)) : 0;
  };
  for (size_t r = 0; r < regions_.size(); ++r) {
    RegionPlan& plan = *regions_[r];
    const Graph& rg = plan.region.graph;
    plan.anchor_node.clear();
    for (const std::vector<size_t>& members : plan.region.global_nodes) plan.anchor_node.push_back(members.front());
    if (!plan.space && plan.backend->opaque_regions()) {
      // Only its boundary lives in host memory: the backend keeps the rest.
      for (ValueId local : rg.inputs) on_host[static_cast<size_t>(plan.region.global_value[static_cast<size_t>(local)])] = 1;
      for (ValueId local : rg.outputs) on_host[static_cast<size_t>(plan.region.global_value[static_cast<size_t>(local)])] = 1;
      continue;
    }
    if (!plan.space) {
      for (ValueId global : plan.region.global_value) on_host[static_cast<size_t>(global)] = 1;
      continue;
    }
    plan.input_resident.assign(rg.inputs.size(), 0);
    plan.input_keep.assign(rg.inputs.size(), 0);
    for (size_t k = 0; k < rg.inputs.size(); ++k) {
      const ValueId global = plan.region.global_value[static_cast<size_t>(rg.inputs[k])];
      const int64_t producer = producer_region[static_cast<size_t>(global)];
      const bool made_here = producer >= 0 && regions_[static_cast<size_t>(producer)]->space == plan.space;
      const bool copied_before = copied_into[static_cast<size_t>(global)].count(plan.space) != 0;
      plan.input_resident[k] = made_here || copied_before;
      if (plan.input_resident[k]) continue;
      ++copies_per_run_;
      copy_bytes_per_run_ += bytes_of(global);
      // A later region of this space that reads it too finds it there.
      for (size_t later = r + 1; later < regions_.size(); ++later) {
        if (regions_[later]->space != plan.space) continue;
        for (ValueId in : partition_.regions[later].inputs) plan.input_keep[k] |= in == global;
      }
      if (plan.input_keep[k]) copied_into[static_cast<size_t>(global)].insert(plan.space);
    }
    plan.output_to_host.assign(rg.outputs.size(), 0);
    plan.output_resident.assign(rg.outputs.size(), 0);
    for (size_t k = 0; k < rg.outputs.size(); ++k) {
      const ValueId global = plan.region.global_value[static_cast<size_t>(rg.outputs[k])];
      const size_t v = static_cast<size_t>(global);
      bool other_space = false;
      for (const MemorySpace* space : read_in[v]) {
        if (space == plan.space) plan.output_resident[k] = 1;
        else other_space = true;
      }
      plan.output_to_host[k] = graph_output[v] || read_on_host[v] || other_space;
      if (plan.output_to_host[k]) {
        on_host[v] = 1;
        ++copies_per_run_;
        copy_bytes_per_run_ += bytes_of(global);
      }
    }
  }
  // A composite runs as one step: its members share the step of its last node.
  std::vector<int64_t> node_step(g.nodes.size());
  for (size_t k = 0; k < node_step.size(); ++k) node_step[k] = static_cast<int64_t>(k);
  for (const Region& region : partition_.regions) {
    for (const Composite& composite : region.composites) {
      for (size_t node : composite.nodes) node_step[node] = static_cast<int64_t>(composite.nodes.back());
    }
  }
  // An opaque region (Backend::opaque_regions) is one step: it may write an
  // output before it has read every input, so none may share memory.
  for (size_t r = 0; r < regions_.size(); ++r) {
    if (!regions_[r]->backend->opaque_regions() || partition_.regions[r].nodes.empty()) continue;
    size_t last = 0;
    for (size_t node : partition_.regions[r].nodes) last = std::max(last, node);
    for (size_t node : partition_.regions[r].nodes) node_step[node] = static_cast<int64_t>(last);
  }
  // The non-finite guard: host regions exact only for finite inputs get the
  // same nodes, in native's own composites, to run on native when an input (scanned
  // per run) or a constant (scanned here, once) holds NaN or ±Inf, or when the
  // region reports one made inside it; for that rerun its inputs stay live
  // until its last node.
  std::vector<int64_t> live_until(num_values, -1);
  for (size_t r = 0; r < regions_.size(); ++r) {
    RegionPlan& plan = *regions_[r];
    plan.guarded = !plan.space && plan.backend->name() != fallback_backend().name && plan.executable->exact_only_for_finite_inputs();
    plan.open_shapes = !plan.space && plan.backend->name() != fallback_backend().name && !all_shapes_static(plan.region.graph);
    if (!plan.guarded || partition_.regions[r].nodes.empty()) continue;
    int64_t last = 0;
    for (size_t node : partition_.regions[r].nodes) last = std::max(last, node_step[node]);
    for (ValueId in : partition_.regions[r].inputs) {
      int64_t& until = live_until[static_cast<size_t>(in)];
      until = std::max(until, last);
    }
  }
  memory_plan_ = plan_memory(g, on_host, node_step, live_until);

  std::optional<GraphUses> uses;  // for the fallbacks' composites, built at the first
  for (size_t r = 0; r < regions_.size(); ++r) {
    RegionPlan& plan = *regions_[r];
    if (!plan.guarded && !plan.open_shapes) continue;
    if (!uses) uses.emplace(g);
    if (!fallback_backend_) fallback_backend_ = fallback_backend().make(plan.fallback_options);
    plan.fallback_backend = fallback_backend_.get();
    // The region's nodes with native's own patterns (a Conv -> Relu fused as native fuses it: the deferred
    // calls of a text recogniser's oneDNN region ran their Relus as passes of their own, 0.18 ms a call).
    Region plain = partition_.regions[r];
    plain.composites = match_composites(g, *uses, plain.nodes, fallback_backend_->declarations());
    plan.fallback_region = extract_region(g, plain);
    plan.constants_not_finite = false;
    for (const Value& v : plan.region.graph.values) {
      if (v.constant && !all_finite(v.constant->view())) plan.constants_not_finite = true;
    }
  }

  region_summaries_.clear();
  for (size_t r = 0; r < regions_.size(); ++r) {
    const RegionPlan& plan = *regions_[r];
    const Region& region = partition_.regions[r];
    RegionSummary summary;
    summary.backend = plan.backend->name();
    summary.memory_space = plan.space ? plan.space->name() : "host";
    summary.node_count = region.nodes.size();
    for (ValueId id : region.inputs) summary.inputs.push_back(g.value(id).name);
    for (ValueId id : region.outputs) summary.outputs.push_back(g.value(id).name);
    for (const Composite& composite : region.composites) summary.composites.push_back(composite_text(g, composite));
    summary.payload_bytes = plan.payload.size();
    region_summaries_.push_back(std::move(summary));
  }
  inputs_.clear();
  outputs_.clear();
  auto dim_names = [](const TensorType& t) {
    std::vector<std::string> names = t.symbols;
    names.resize(t.rank_known ? t.dims.size() : 0);
    return names;
  };
  for (ValueId id : g.inputs) {
    const TensorType& t = g.value(id).type;
    inputs_.push_back({g.value(id).name, t.kind, t.dtype, t.rank_known ? t.dims : Shape{}, dim_names(t), t.rank_known});
  }
  for (ValueId id : g.outputs) {
    const TensorType& t = g.value(id).type;
    outputs_.push_back({g.value(id).name, t.kind, t.dtype, t.rank_known ? t.dims : Shape{}, dim_names(t), t.rank_known});
  }
  // Open input dims that share a name, grouped once here for validate_inputs.
  named_open_dims_.clear();
  std::map<std::string, size_t> group_of;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const ValueDesc& d = inputs_[i];
    if (d.kind != ValueKind::kTensor) continue;
    for (size_t k = 0; k < d.shape.size() && k < d.dim_names.size(); ++k) {
      if (d.shape[k] >= 0 || d.dim_names[k].empty()) continue;
      auto [it, inserted] = group_of.emplace(d.dim_names[k], named_open_dims_.size());
      if (inserted) named_open_dims_.emplace_back();
      named_open_dims_[it->second].push_back({i, k});
    }
  }
}

int64_t CompiledModel::constant_bytes() const {
  int64_t total = 0;
  for (const Value& v : graph_.values) {
    if (v.constant) total += static_cast<int64_t>(v.constant->nbytes());
  }
  return total;
}

std::vector<Tensor> CompiledModel::run(const std::vector<TensorView>& inputs, const std::vector<TensorView*>& caller_outputs,
                                       RunProfile* profile, BoxedIO* boxed) const {
  const IdleSpinScope idle_spinners(num_threads_);
  validate_inputs(inputs, boxed);
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (outputs_[i].kind == ValueKind::kTensor) continue;
    if (!boxed) {
      throw_user_error("output '", outputs_[i].name, "' is ", value_kind_phrase(outputs_[i].kind),
                       "; run the model through an interface that takes sequences and optionals");
    }
    if (i < caller_outputs.size() && caller_outputs[i]) {
      throw_user_error("output '", outputs_[i].name, "' is ", value_kind_phrase(outputs_[i].kind), ", not a tensor buffer");
    }
  }
  if (!caller_outputs.empty() && caller_outputs.size() != outputs_.size()) {
    throw_user_error("the model has ", outputs_.size(), " outputs but ", caller_outputs.size(), " output buffers were given");
  }
  ArenaLease arena(*this);
  RunStore& store = arena.start_store(poison_memory(), bounded_bytes_.empty() ? nullptr : &bounded_bytes_);
  if (profile) {
    profile->node_milliseconds.resize(placement_.size(), 0.0);
    profile->region_milliseconds.resize(regions_.size(), 0.0);
    profile->region_fallbacks.resize(regions_.size(), 0);
  }
  std::vector<Tensor> gathered;  // contiguous copies of strided inputs, for regions that need them
  bind_inputs(inputs, store, gathered);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs_[i].kind != ValueKind::kTensor) {
      BoxedValue box = *boxed->inputs[i];
      box.kind = inputs_[i].kind == ValueKind::kSequence ? ValueKind::kSequence : box.kind;
      store.boxed(graph_.inputs[i]) = std::move(box);
    }
  }
  // Outputs computed by a node are written straight into the caller's buffer where the region can.
  const SmallVector<char, 16> written_in_place = bind_outputs(caller_outputs, store);
  {
    ResidentValues resident;
    for (size_t r = 0; r < regions_.size(); ++r) {
      run_region(*regions_[r], store, resident, profile, r);
      for (ValueId id : release_after_region_[r]) store.release(id);
    }
  }
  fill_caller_outputs(caller_outputs, written_in_place, store);
  if (profile) profile->counts += store.counts;
  {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    ++stats_.runs;
    stats_.counts += store.counts;
  }
  std::vector<Tensor> results(outputs_.size());
  if (boxed) boxed->outputs.assign(outputs_.size(), BoxedValue{});
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (outputs_[i].kind != ValueKind::kTensor) {
      boxed->outputs[i] = store.boxed(graph_.outputs[i]);
      continue;
    }
    if (i < caller_outputs.size() && caller_outputs[i]) continue;  // filled above
    results[i] = store.take(graph_.outputs[i]);
  }
  return results;
}

}  // namespace tessera
