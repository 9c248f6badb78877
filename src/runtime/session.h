// A compiled model: the optimised graph, its partition into regions, each
// region compiled by its backend, the memory plan and the constants.
// Made by compile() from a frontend's graph or by load() from a .tsr
// artifact; immutable afterwards, so run() may be called from several
// threads at once.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"
#include "ir/small_vector.h"
#include "partition/partitioner.h"
#include "passes/precision.h"
#include "report/check_report.h"
#include "runtime/memory_plan.h"

namespace tessera {

struct TuningRecord;

struct Artifact;  // artifact/artifact.h

struct PlacementReport;
struct RegionPlan;  // runtime/region_plan.h
struct BodyRecords;  // runtime/compiled_body.h
class RunStore;     // runtime/region_plan.h

struct CompileOptions {
  std::map<std::string, Shape> input_shapes;  // by input name or symbolic dim name
  int num_threads = 1;
  /// Backends by name, highest priority first; empty: every built-in backend
  /// used by default, in its priority order. Unless strict, the native
  /// backend is added last when missing, so every op can run.
  std::vector<std::string> backends;
  std::vector<std::pair<std::string, std::string>> place;  // selector → backend (PartitionPolicy::place)
  std::vector<std::pair<std::string, std::string>> deny;   // backend → selector
  int min_region_size = 1;
  bool strict = false;
  /// --precision: bf16 lets backends that declare bf16 support run Conv,
  /// MatMul and Gemm in bfloat16 with float32 accumulation (passes/precision.h).
  PrecisionPolicy precision;
  /// A tuning record (`tessera tune`) to apply: its placement, when it was made for this model
  /// (runtime/tuning_record.h says what a mismatch does).
  std::shared_ptr<const TuningRecord> tuning;
  /// --dim-bounds NAME=MIN..MAX, by open dim name: each run checks the inputs' dims of that name against
  /// them, and values whose size follows from bounded dims take memory for their size at the upper bounds,
  /// so that once a run has been made no run within the bounds allocates. Not part of the plan: applies
  /// to artifacts too.
  std::map<std::string, std::pair<int64_t, int64_t>> dim_bounds;
  /// --input-values NAME=VALUE: inputs whose value is fixed at compile time (passes/bind_input_values.h);
  /// each run checks that the caller feeds that value.
  std::map<std::string, std::string> input_values;
};

struct ValueDesc {
  std::string name;
  /// A tensor, or a sequence or optional (run through BoxedIO); dtype and
  /// shape are then those of its tensors (-1 where they may differ).
  ValueKind kind = ValueKind::kTensor;
  DType dtype = DType::kUndefined;
  Shape shape;  // -1 where not known before running
  std::vector<std::string> dim_names;  // the model's names for its dims (ONNX dim_param) or "", one per dim
  /// False when not even the rank is known before running (a sequence's tensors of any rank).
  bool rank_known = true;
};

struct NodePlacement {
  std::string node_name;
  std::string op_type;
  std::string backend;  // "native", ...; "folded" for nodes evaluated at compile time
  std::string note;     // e.g. "fused into 'conv_3' (pattern ConvActivation)", "computed at compile time"
  int64_t region = -1;  // index into regions(), -1 for folded nodes
  std::string why;      // the partitioner's reason for the backend
  std::string precision;  // "bf16" where the node computes in bfloat16 (float32 accumulation), "" otherwise
  /// Under --precision bf16, for a Conv/MatMul/Gemm that stays float32: why
  /// (the final layer, or its backend's refusal). Not kept in artifacts.
  std::string precision_note;
};

struct RegionSummary {
  std::string backend;
  std::string memory_space;  // "host" or the backend's space
  size_t node_count = 0;     // graph nodes (composite members counted one by one)
  std::vector<std::string> inputs;   // boundary values
  std::vector<std::string> outputs;
  std::vector<std::string> composites;  // "ConvActivation: conv_3, relu_3"
  size_t payload_bytes = 0;
};

/// What runs did that a profile and the model's stats count.
struct RunCounts {
  /// Regions compiled with open dims (a model with symbolic dims): how often a
  /// region found what it needs for the call's shapes prepared (hits), had to
  /// prepare it (misses, e.g. oneDNN primitives for a new shape) and how long
  /// that took, and how often it could not run at the shapes and ran on native.
  int64_t shape_cache_hits = 0;
  int64_t shape_cache_misses = 0;
  double shape_prepare_milliseconds = 0;
  int64_t shape_fallbacks = 0;
  /// Region runs at shapes their backend had not prepared that ran on native instead, as cheaper by
  /// measurement than preparing them (runtime/shape_admission.cc).
  int64_t shape_deferrals = 0;
  /// Native fallback regions compiled during the run, at their first need.
  int64_t fallback_compiles = 0;
  /// Working memory allocated during the run (not taken from what earlier runs
  /// left for reuse): values of shapes known only at run time, backends'
  /// workspaces; not the outputs handed to the caller.
  int64_t allocations = 0;
  /// Caller buffers the run could not use in place (a strided input copied
  /// contiguous for a region that reads only those, an output made in the
  /// run's memory and copied into the caller's buffer), and their bytes.
  int64_t binding_copies = 0;
  int64_t binding_copy_bytes = 0;

  RunCounts& operator+=(const RunCounts& other) {
    shape_cache_hits += other.shape_cache_hits;
    shape_cache_misses += other.shape_cache_misses;
    shape_prepare_milliseconds += other.shape_prepare_milliseconds;
    shape_fallbacks += other.shape_fallbacks;
    shape_deferrals += other.shape_deferrals;
    fallback_compiles += other.fallback_compiles;
    allocations += other.allocations;
    binding_copies += other.binding_copies;
    binding_copy_bytes += other.binding_copy_bytes;
    return *this;
  }
};

/// What a profiled run measured.
struct RunProfile {
  /// false: only regions are timed (and counted); backends run as without a profile, with no per-node
  /// timing (which makes a plug-in report every node, and oneDNN wait after every step).
  bool time_nodes = true;
  std::vector<double> node_milliseconds;    // per placement() row (folded nodes: 0)
  /// Per placement() row, per node inside its compiled control-flow bodies (inner_placement(row)'s
  /// order): their times, which the row's own time includes (empty where a row has none or none ran).
  std::vector<std::vector<double>> inner_node_milliseconds;
  std::vector<double> region_milliseconds;  // per region, copies into and out of it included
  int64_t copies = 0;                       // tensor copies between memory spaces
  /// Per region: runs on native because an input or constant held NaN or ±Inf
  /// and the region's backend is exact only for finite inputs.
  std::vector<int64_t> region_fallbacks;
  int64_t copy_bytes = 0;
  RunCounts counts;  // open-dim regions' shape cache, native fallbacks, allocations
};

/// What a model's runs have done since it was compiled or loaded (every run,
/// profiled or not; CompiledModel::stats).
struct ModelStats {
  int64_t runs = 0;
  RunCounts counts;
};

/// The accuracy check's defaults by a region's precision (the one home of these numbers; the CLI's
/// --help and Python's check() docstring quote them): relative error and cosine similarity allowed.
inline constexpr double kCheckToleranceFloat32 = 1e-4;
inline constexpr double kCheckToleranceBf16 = 3e-2;   // with bf16 nodes
inline constexpr double kCheckToleranceInt8 = 0.1;    // with quantized ops (see region_check.cc for why)
inline constexpr double kCheckCosineBf16 = 0.999;
inline constexpr double kCheckCosineInt8 = 0.99;

/// What an accuracy check (CompiledModel::check) allows per region output.
struct CheckOptions {
  /// max |actual - reference| / max |reference|; negative: by precision (kCheckTolerance*).
  double tolerance = -1;
  /// Cosine similarity required; negative: by precision (none for float32, kCheckCosine*).
  double min_cosine = -1;
  /// The reference computes in float64 (every float32 value, constant and
  /// Cast target of the region widened) instead of float32; native regions
  /// are then compared too.
  bool float64_reference = false;
};

/// The sequence and optional inputs and outputs of a run (ValueDesc::kind).
struct BoxedIO {
  std::vector<const BoxedValue*> inputs;  // per model input: set for each sequence or optional input
  std::vector<BoxedValue> outputs;        // per model output, filled by run for each sequence or optional output
};

/// A key/value cache the caller may keep in one buffer (I/O binding): graph
/// output `output` is Concat(graph input `input`, ...) along `axis`, so the
/// output may be bound to the same memory as the input, as a box of it grown
/// along the axis (same data and strides), and a run appends the new
/// positions only. Found at compile and load (CompiledModel::cache_pairs).
struct CachePair {
  size_t input = 0;
  size_t output = 0;
  int64_t axis = 0;
};

/// A warning when `num_threads` is more than the CPUs this process may run on, else "".
std::string thread_count_warning(int num_threads);

class CompiledModel {
 public:
  /// Runs the compile pipeline on `graph` (straight from a frontend).
  static std::unique_ptr<CompiledModel> compile(Graph graph, const CompileOptions& options);
  /// Loads a .tsr artifact (no ONNX file needed). Only num_threads of the
  /// options applies; anything that changes the plan is a user error.
  static std::unique_ptr<CompiledModel> load(const std::string& path, const CompileOptions& options);
  /// Same, from the artifact's bytes (`keep_alive` owns them; `name` labels errors).
  static std::unique_ptr<CompiledModel> load_from_memory(std::span<const uint8_t> bytes,
                                                         std::shared_ptr<const void> keep_alive,
                                                         const std::string& name, const CompileOptions& options);
  /// Writes the model as a .tsr artifact.
  void save(const std::string& path) const;
  /// The .tsr artifact's bytes, as save would write them.
  std::vector<uint8_t> serialize() const;
  ~CompiledModel();

  const std::vector<ValueDesc>& inputs() const { return inputs_; }
  /// The value input `index` was fixed to at compile time (input_values), or null.
  const Tensor* fixed_input_value(size_t index) const {
    for (const auto& [i, value] : fixed_input_values_) {
      if (i == index) return &value;
    }
    return nullptr;
  }
  const std::vector<ValueDesc>& outputs() const { return outputs_; }
  const Graph& graph() const { return graph_; }
  const MemoryPlan& memory_plan() const { return memory_plan_; }
  /// Every node of the model: executed nodes first (in graph order, as
  /// profiles use), then nodes folded away at compile time.
  const std::vector<NodePlacement>& placement() const { return placement_; }
  /// The nodes inside placement row `row`'s compiled control-flow bodies (an If's branches, a Loop's
  /// body), named by their path below it; empty for most rows.
  const std::vector<InnerNodePlacement>& inner_placement(size_t row) const;
  const std::vector<RegionSummary>& regions() const { return region_summaries_; }
  /// Backend names in the partition's priority order.
  const std::vector<std::string>& backend_names() const { return partition_.backends; }
  /// How the compile went: its partition-and-compile rounds (a node a backend refuses when compiling it
  /// starts another) and the regions compiled, or taken unchanged from the round before (region_key.h).
  /// Zeros for a model loaded from an artifact.
  struct CompileRounds {
    int64_t rounds = 0;
    int64_t regions_compiled = 0;
    int64_t regions_reused = 0;
  };
  const CompileRounds& compile_rounds() const { return compile_rounds_; }
  int64_t constant_bytes() const;
  /// Elements in the model's initializers, as imported (before folding).
  int64_t parameter_count() const { return parameter_count_; }
  /// Copies between memory spaces one run makes (from the plan; values of
  /// shapes known only at run time count as copies of 0 bytes here).
  int64_t copies_per_run() const { return copies_per_run_; }
  int64_t copy_bytes_per_run() const { return copy_bytes_per_run_; }
  /// Compile-time warnings (e.g. --precision bf16 where no backend runs bf16).
  const std::vector<std::string>& warnings() const { return warnings_; }
  /// runtime/tuning_record.h's graph_fingerprint of the model as compiled (input shapes bound);
  /// "" for a model loaded from an artifact.
  const std::string& fingerprint() const { return fingerprint_; }
  /// Where each node ran and why, for the table / JSON / DOT / HTML reports.
  /// `profile` (optional) adds times.
  PlacementReport placement_report(const std::string& model_name, const RunProfile* profile = nullptr) const;

  /// Runs on inputs given in model input order (the data is read in place).
  /// For each output, caller_outputs[i] (when given and non-null) is the
  /// caller's buffer (I/O binding): it must have the output's dtype and the
  /// shape the run makes (checked where the output has open dims); written in
  /// place where the region making it can (ExecutableRegion::writes_into),
  /// else made in the run's memory and copied in. Inputs and caller buffers
  /// may be strided (padded row-major, TensorView::strides): a region that
  /// does not read strided views gets a contiguous copy. The other outputs
  /// are returned as owned tensors. Throws a user error on a bad input.
  /// When `profile` is given, its vectors are resized and times are added.
  /// A model with sequence or optional inputs or outputs needs `boxed`: its
  /// inputs there (the views at those positions are ignored), its outputs
  /// returned there (results[i] stays empty for them).
  std::vector<Tensor> run(const std::vector<TensorView>& inputs, const std::vector<TensorView*>& caller_outputs = {},
                          RunProfile* profile = nullptr, BoxedIO* boxed = nullptr) const;
  /// Runs the model once on `inputs` and, after each region, the same region's
  /// nodes on the native backend (float32, no fused patterns) on the inputs
  /// the region just read, comparing every output (src/runtime/region_check.cc).
  /// Regions of native itself are listed, not compared. `model_name` labels the report.
  CheckReport check(const std::vector<TensorView>& inputs, const CheckOptions& options, const std::string& model_name) const;
  /// Counts over every run so far (thread-safe).
  ModelStats stats() const;
  /// The model's key/value caches (CachePair), by output order.
  const std::vector<CachePair>& cache_pairs() const { return cache_pairs_; }

 private:
  CompiledModel();
  static std::unique_ptr<CompiledModel> from_artifact(Artifact artifact, const std::string& path,
                                                      const CompileOptions& options);
  Artifact to_artifact() const;
  friend struct BodyPlans;  // compiled_body.cc: a body's model to and from its plan in the artifact
  void validate_inputs(const std::vector<TensorView>& inputs, const BoxedIO* boxed = nullptr) const;
  /// After the regions exist: memory plan, copy plan, summaries, I/O descriptions.
  void finish();
  /// Caller buffers (runtime/session_binding.cc). Binds the tensor inputs,
  /// strided ones as they are where every region reading them takes them,
  /// else as contiguous copies kept in `gathered`.
  void bind_inputs(const std::vector<TensorView>& inputs, RunStore& store, std::vector<Tensor>& gathered) const;
  /// Checks the caller's output buffers and binds those the regions write in
  /// place; returns 1 per output bound so.
  SmallVector<char, 16> bind_outputs(const std::vector<TensorView*>& caller_outputs, RunStore& store) const;
  /// After the run: each caller buffer not written in place gets its output, checked in shape.
  void fill_caller_outputs(const std::vector<TensorView*>& caller_outputs, const SmallVector<char, 16>& in_place,
                           RunStore& store) const;
  void find_cache_pairs();
  /// Checks options.dim_bounds against the model's open dims and sizes values at the upper bounds.
  void apply_dim_bounds(const std::map<std::string, std::pair<int64_t, int64_t>>& bounds);
  /// Per input and dim: the bounds of its named open dim, or {-1, -1}.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> input_dim_bounds_;
  /// Inputs whose value was fixed at compile time (passes/bind_input_values.h): (input index, value).
  std::vector<std::pair<size_t, Tensor>> fixed_input_values_;
  /// Per value: its bytes at the dims' upper bounds, or 0 where not known (RunStore takes at least that).
  std::vector<size_t> bounded_bytes_;
  std::vector<CachePair> cache_pairs_;
  /// Per region: the values passed between regions that no later region reads, released after it runs
  /// (RunStore::release: their run-time buffers go to later values).
  std::vector<std::vector<ValueId>> release_after_region_;
  class ArenaLease;

  Graph graph_;
  std::vector<ValueDesc> inputs_;
  std::vector<ValueDesc> outputs_;
  PartitionResult partition_;
  std::vector<std::unique_ptr<Backend>> backends_;  // per partition_.backends (null when not built in; loads only)
  CompileRounds compile_rounds_;
  std::unique_ptr<Backend> fallback_backend_;  // native, for guarded regions (run_region)
  std::vector<std::unique_ptr<RegionPlan>> regions_;
  std::vector<RegionSummary> region_summaries_;
  MemoryPlan memory_plan_;
  std::vector<NodePlacement> placement_;
  std::vector<std::vector<InnerNodePlacement>> inner_placement_;  // per placement row, where it has bodies
  std::shared_ptr<BodyRecords> body_records_;  // control-flow bodies compiled or loaded for this model
  std::shared_ptr<const void> artifact_mapping_;  // constants and payloads of a loaded artifact point into it
  int64_t copies_per_run_ = 0;
  int64_t copy_bytes_per_run_ = 0;
  // Arenas of finished runs, reused by later ones (one per concurrent run at most).
  mutable std::mutex arena_mutex_;
  mutable std::vector<std::unique_ptr<Buffer>> free_arenas_;
  // With them (one per arena, same order), the buffers of values of shapes known only at run time (RunStore's pool).
  mutable std::vector<BufferPool> free_pools_;
  mutable std::vector<std::unique_ptr<RunStore>> free_stores_;  // with free_arenas_, one each
  // Open input dims that share an ONNX name, as (input, dim) groups: one value per call (validate_inputs).
  std::vector<std::vector<std::pair<size_t, size_t>>> named_open_dims_;
  mutable std::mutex stats_mutex_;
  mutable ModelStats stats_;
  int64_t parameter_count_ = 0;
  int num_threads_ = 1;  // the session's threads (CompileOptions::num_threads): runs above one keep idle spinners
  std::vector<std::string> warnings_;
  std::string fingerprint_;
  std::shared_ptr<const TuningRecord> tuning_;  // the record applied at compile time (not kept in artifacts)
  /// Sets placement_[].precision, and the notes of refusals and chosen algorithms, from the
  /// regions' executables (after they exist).
  void read_node_precisions();
};

}  // namespace tessera
