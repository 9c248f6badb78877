// Runtime-internal: one region of a compiled model and the per-run stores
// its backend reads and writes values through.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "backends/backend.h"
#include "partition/partitioner.h"
#include "runtime/memory_plan.h"
#include "runtime/session.h"
#include "runtime/shape_admission.h"

namespace tessera {

struct RegionPlan {
  size_t backend_index = 0;
  const Backend* backend = nullptr;
  MemorySpace* space = nullptr;  // null: host memory
  RegionGraph region;
  std::vector<uint8_t> payload_owned;  // compiled here; empty for a loaded artifact
  std::span<const uint8_t> payload;    // into payload_owned or the artifact mapping
  std::unique_ptr<ExecutableRegion> executable;
  std::vector<size_t> anchor_node;  // per region-graph node: the global node its time is reported on
  // Device regions only, per region input / output:
  std::vector<char> input_resident;   // already in this space (made or copied in by an earlier region of it)
  std::vector<char> input_keep;       // copied in here and kept in the space for later regions of it
  std::vector<char> output_to_host;   // a host copy is needed (graph output, or read by another space)
  std::vector<char> output_resident;  // kept in this space for later regions of the same space
  // The non-finite guard (host regions whose executable is exact only for
  // finite inputs, ExecutableRegion::exact_only_for_finite_inputs): before each
  // run the region's inputs are scanned, and when one holds NaN or ±Inf the
  // same nodes run on native instead, compiled on first need; when the region
  // reports a NaN or ±Inf made inside it (ValueStore::made_non_finite), they
  // run on native after it, from its inputs, which the memory plan keeps live
  // until the region's last node.
  bool guarded = false;
  /// A host region of a backend other than native whose graph has open dims
  /// (a model compiled with symbolic dims): run with try_run, and on native
  /// (fallback_region) where it cannot run at a call's shapes.
  bool open_shapes = false;
  bool constants_not_finite = false;  // a constant of the region holds NaN or ±Inf: always native
  const Backend* fallback_backend = nullptr;
  RegionOptions fallback_options;  // the session's, as for `executable`
  RegionGraph fallback_region;  // the region's nodes without composites (native fuses none of them)
  mutable std::once_flag fallback_compiled;
  mutable std::unique_ptr<ExecutableRegion> fallback;
  /// open_shapes: at an input shape the executable has not prepared, whether to prepare it or run
  /// on native this call (runtime/shape_admission.cc).
  mutable ShapeAdmission admission;
};

/// Values of one run in host memory, by global value id: inputs point at the
/// caller's data, intermediates into the arena, outputs at caller buffers or
/// owned tensors, dynamic values owned.
class RunStore {
 public:
  /// `pool` (optional, outliving the store): buffers of an earlier run's values
  /// whose shapes were known only at run time; such values (not graph outputs,
  /// which the caller keeps) take one that is large enough, and every one
  /// goes back when the store dies. Repeated runs then neither map nor clear
  /// fresh memory for them (the plan's arena for values of open dims).
  /// `bounded_bytes` (optional, per value): the least a pool buffer for the value holds (its size at the
  /// upper bounds of its dims, CompileOptions::dim_bounds), so every run asks the pool for the same sizes.
  RunStore(const Graph& graph, const MemoryPlan& plan, Buffer& arena, bool poison, BufferPool* pool = nullptr,
           const std::vector<size_t>* bounded_bytes = nullptr);
  /// A store to be started with begin() for each run (CompiledModel keeps one per arena: a run of a small
  /// model, a Loop's body trip, then allocates almost nothing to set up its values).
  explicit RunStore(const Graph& graph);
  ~RunStore();
  /// Starts a run: every value as the constructor above leaves it, reusing this store's memory.
  void begin(const MemoryPlan& plan, Buffer& arena, bool poison, BufferPool* pool = nullptr,
             const std::vector<size_t>* bounded_bytes = nullptr);
  /// Ends a run: its pool buffers go back to the pool, its tensors are dropped (the caller has taken the
  /// outputs). The destructor does this for a run not ended.
  void end();
  RunStore(const RunStore&) = delete;
  RunStore& operator=(const RunStore&) = delete;
  const TensorView& get(ValueId id) { return views_[static_cast<size_t>(id)]; }
  TensorView& output(ValueId id);
  void allocate(ValueId id);
  /// ValueStore::alias for the run's values: `output` not planned, not a
  /// graph output and not yet written; `input` anywhere but the arena (whose
  /// slots later values reuse): a graph input, a constant, or memory that
  /// stays borrowed or owned until the store dies.
  bool alias(ValueId output, ValueId input);
  /// `id` will not be read again in this run: its pool buffer (if it has one)
  /// goes back to the pool for later values once no alias of it is left.
  void release(ValueId id);
  void bind(ValueId id, const TensorView& view) { views_[static_cast<size_t>(id)] = view; }
  /// bind, without the view's strides (they lay it out contiguously): into the slot's own vectors, so a
  /// run that binds the same shapes as the last allocates nothing.
  void bind_contiguous(ValueId id, const TensorView& view) {
    TensorView& slot = views_[static_cast<size_t>(id)];
    slot.dtype = view.dtype;
    slot.shape = view.shape;
    slot.data = view.data;
    slot.strides.clear();
  }
  /// The owned tensor holding a value, or a copy when the value lives elsewhere.
  Tensor take(ValueId id);
  /// A sequence or optional value of the run.
  BoxedValue& boxed(ValueId id) { return boxed_[static_cast<size_t>(id)]; }
  /// Whether the run has a pool (buffers kept from one run to the next for values of open dims).
  bool has_pool() const { return pool_ != nullptr; }
  /// With a pool: at least `bytes` of working memory from it (`room_to_grow`: a new buffer a quarter
  /// larger, for a larger shape next time), held until give_back or the run's end. Returns its slot.
  int32_t borrow(size_t bytes, bool room_to_grow, void** data);
  void give_back(int32_t slot);
  /// What this run did that profiles and ModelStats count.
  RunCounts counts;

 private:
  const Graph& graph_;
  std::vector<TensorView> views_;
  std::vector<Tensor> owned_;
  std::map<size_t, BoxedValue> boxed_;
  bool poison_;
  std::vector<char> is_output_;
  const char* arena_begin_;
  const char* arena_end_;
  BufferPool* pool_;
  const std::vector<size_t>* bounded_bytes_;
  std::vector<std::unique_ptr<Buffer>> borrowed_;  // null where released back to the pool
  std::vector<int32_t> buffer_of_;    // per value: its slot in borrowed_, or -1
  std::vector<int32_t> buffer_refs_;  // per slot: values viewing it (aliases included)
  size_t held_bytes_ = 0;             // borrowed now
  size_t peak_bytes_ = 0;             // most borrowed at once this run
  bool running_ = false;              // between begin() and end()
};

/// Device-space values of one run that outlive the region that made them
/// (read by later regions of the same space); freed when the run ends.
class ResidentValues {
 public:
  ResidentValues() = default;
  ResidentValues(const ResidentValues&) = delete;
  ResidentValues& operator=(const ResidentValues&) = delete;
  ~ResidentValues();
  void put(ValueId id, MemorySpace* space, const TensorView& view);
  const TensorView* find(ValueId id, const MemorySpace* space) const;

 private:
  struct Entry {
    ValueId id;
    MemorySpace* space;
    TensorView view;
  };
  std::vector<Entry> entries_;
};

/// Runs one region against the run's values: host regions read and write the
/// RunStore directly; device regions get their inputs copied in (unless
/// resident) and their outputs copied out where the plan says so. A guarded
/// region whose inputs or constants are not all finite runs on native.
/// A region graph's values kept apart from the run's: constants as views,
/// inputs bound by the caller (bind), everything computed in tensors of its
/// own. For regions run off the plan: the non-finite guard's native fallback
/// and the accuracy check's reference.
class DetachedRegionStore : public ValueStore {
 public:
  explicit DetachedRegionStore(const Graph& graph);
  void bind(ValueId local, const TensorView& view) { views_[static_cast<size_t>(local)] = view; }
  const TensorView& get(ValueId id) override { return views_[static_cast<size_t>(id)]; }
  TensorView& output(ValueId id) override;
  void allocate(ValueId id) override;
  BoxedValue& boxed(ValueId id) override { return boxed_[static_cast<size_t>(id)]; }

 protected:
  const Graph& graph_;
  std::vector<TensorView> views_;
  std::vector<Tensor> owned_;
  std::map<size_t, BoxedValue> boxed_;
};

/// `standalone` (accuracy checks): a device region copies every input in from
/// the host and every output back out, keeping nothing resident, so that all
/// boundary values of the run are on the host after each region.
/// Compiles the plan's fallback region once (whichever thread gets there first), at its first need.
/// True when this call compiled it.
bool compile_fallback(const RegionPlan& plan);
void run_region(const RegionPlan& plan, RunStore& store, ResidentValues& resident, RunProfile* profile,
                size_t region_index, bool standalone = false);

}  // namespace tessera
