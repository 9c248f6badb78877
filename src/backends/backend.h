// The contract between the core and a backend (see docs/architecture.md).
//
// A backend declares what it can run (per-op predicates and fused patterns,
// src/partition/declarations.h), says where its tensors live (a memory
// space), and compiles a region the partitioner gives it into a payload (bytes
// stored in the artifact) plus an executable region; at load time it rebuilds
// the executable region from the payload. It knows nothing of other backends,
// the artifact's layout or the CLI. Backends propose; the core (partitioner,
// runtime) decides.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"

namespace tessera {

class Declarations;  // partition/declarations.h

/// Where a backend's tensors live. The host space is represented by a null
/// MemorySpace pointer; a device space allocates and copies its own memory.
/// The runtime inserts copies only where a producer's and a consumer's spaces
/// differ, and never reads or writes device memory except through copy_*.
class MemorySpace {
 public:
  virtual ~MemorySpace() = default;
  virtual std::string name() const = 0;
  /// At least `bytes` bytes (bytes may be 0), 64-byte aligned; throws on failure.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* data) = 0;
  virtual void copy_from_host(void* device_dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* device_src, size_t bytes) = 0;
  /// Waits for queued work (copies, kernels) of this space. The runtime calls
  /// it after each region of the space, before host buffers that a copy read
  /// can be reused; a space without a queue has nothing to wait for.
  virtual void synchronize() {}
};

/// Per-run access to a region's values (ids are the region graph's). The
/// runtime implements it; every view points into the backend's memory space.
class ValueStore {
 public:
  virtual ~ValueStore() = default;
  /// The view of a value that is already computed (region input, constant,
  /// or an earlier node's output). Constants are host tensors even for a
  /// device backend: a device backend copies them once, at compile or load.
  virtual const TensorView& get(ValueId id) = 0;
  /// The view an output will be written to. When the plan knows the shape,
  /// data points at planned memory; otherwise data is null and the backend
  /// must set dtype/shape and call allocate().
  virtual TensorView& output(ValueId id) = 0;
  virtual void allocate(ValueId id) = 0;
  /// Lets `output` view the bytes of `input` (same dtype and byte size, a
  /// new shape: Reshape, Squeeze...) instead of memory of its own, where the
  /// store can promise that those bytes stay unchanged while `output` may be
  /// read in this run. Returns false (the caller allocates and copies) where
  /// it cannot: output memory already planned or owned by the caller, an
  /// input whose memory the plan reuses after its last reader.
  virtual bool alias(ValueId output, ValueId input) { return false; }
  /// Called by a backend after the last step of the run that reads `id`, a
  /// value it computed inside the region that is not a region output: memory
  /// the store gave it for this run (values of shapes known only at run time)
  /// may then go to later values (once no alias of it is left). Optional.
  virtual void release(ValueId id) {}
  /// The box of a sequence or optional value (ValueKind other than tensor):
  /// read for an input, filled in for an output. Only the native backend gets
  /// such values (the partitioner keeps their nodes there); stores of regions
  /// that cannot hold them refuse.
  virtual BoxedValue& boxed(ValueId id) {
    throw_internal_error("value ", id, " is a sequence or optional, which this region's store cannot hold");
  }
  /// True when the caller asked for per-node times: the backend then reports
  /// each node it ran through node_finished (index into the region graph's nodes).
  virtual bool profiling() const { return false; }
  virtual void node_finished(size_t node_index, double milliseconds) {}
  /// With profiling: the times of the nodes inside node `node_index`'s compiled control-flow bodies, in
  /// ExecutableRegion::node_inner_placement's order (included in its node_finished time).
  virtual void inner_nodes_finished(size_t node_index, const std::vector<double>& milliseconds) {}
  /// Called by a region exact only for finite inputs that saw a NaN or ±Inf
  /// made inside it from finite inputs (an overflow, Inf - Inf, 0 * Inf): a
  /// later step may have dropped it. The runtime then runs the region again
  /// on native, from the same inputs, before anything reads its outputs.
  virtual void made_non_finite() {}
  /// Called by a region compiled with open dims before it runs at the shapes
  /// of this call: `created` when it had to prepare them first (e.g. create
  /// oneDNN primitives), taking `milliseconds`; otherwise it found them prepared
  /// (`milliseconds` > 0: and prepared them again, in full). `full`: what runs
  /// is the backend's full tier, not a quick preparation of slower code.
  virtual void shapes_prepared(bool created, double milliseconds, bool full) {}
  /// For such a region about to prepare this call's shapes: true when the
  /// runtime asks for its full tier at once (a shape that keeps coming), not
  /// its quick one (runtime/shape_admission.cc).
  virtual bool prepare_in_full() const { return false; }
  /// Called by a backend that allocated memory for this run (a workspace for a
  /// shape larger than any before, a first run's context), so that runs can
  /// show they allocate nothing once warmed up.
  virtual void allocated(size_t bytes) {}
  /// Working memory for one call of a region (at least `bytes`, 64-byte
  /// aligned) from the run's pool: shared with the regions that run before
  /// and after it and kept from run to run, so a model of many regions maps
  /// fresh memory once, not once per region. Null where the store has no
  /// pool (the backend then keeps a workspace of its own). Held until
  /// give_back_workspace(*slot) or the end of the run.
  virtual void* borrow_workspace(size_t bytes, int32_t* slot) { return nullptr; }
  virtual void give_back_workspace(int32_t slot) {}
};

struct RegionOptions {
  int num_threads = 1;
  /// Per region-graph node (empty: none): 1 where the core allows the node to
  /// compute in bfloat16 with float32 accumulation (--precision bf16; the
  /// core keeps numerically sensitive ops and, unless asked, the final layer
  /// in float32). A backend that declares bf16 support (Backend::bf16_refusal)
  /// may lower such convolutions and matmuls in bf16; others ignore it.
  std::vector<char> bf16_nodes;
  /// For a region with open dims (a model compiled with symbolic dims): per
  /// region input, its dims when every open dim of the model's inputs is
  /// kProbeDim, from shape inference over the whole model (empty where that
  /// could not be worked out). A backend that specialises per shape may lower
  /// the region once at these to see what it would refuse at such sizes.
  std::vector<Shape> probe_input_dims;
};

/// The size every open dim of a model's inputs takes in the compile-time probe
/// (RegionOptions::probe_input_dims): a batch of 256, 256 tokens, a 256-pixel side.
inline constexpr int64_t kProbeDim = 256;

/// A node inside a control-flow body, for placement reports (ExecutableRegion::node_inner_placement).
struct InnerNodePlacement {
  std::string path;     // below the node that holds the body: "then_branch/Conv_3"
  std::string op_type;
  std::string backend;  // where the body's compiled model runs it; "folded" when computed at compile time
  std::string note;
};

class ExecutableRegion {
 public:
  virtual ~ExecutableRegion() = default;
  /// Runs the region once. May be called from several threads at once.
  virtual void run(ValueStore& store) const = 0;
  /// Runs the region, or returns false without writing anything when it
  /// cannot run at the shapes of this call's inputs: a region compiled with
  /// open dims whose backend finds, at these dims, that a node would need
  /// what its library does not have. The runtime then runs the region's nodes
  /// on the fallback backend for this call. Regions of static shapes run.
  virtual bool try_run(ValueStore& store) const {
    run(store);
    return true;
  }
  /// For a region compiled with open dims: whether what it prepares per input
  /// shape (oneDNN primitives) is ready for the shapes of this call's inputs,
  /// or known to be refused there, without preparing anything. When it is not,
  /// the runtime may run the region's nodes on native for this call instead
  /// (runtime/shape_admission.cc). Regions that prepare nothing per shape: true.
  virtual bool prepared_for(ValueStore& store) const { return true; }
  /// True when the region computes NaN and ±Inf as numpy and PyTorch do only
  /// while its inputs are finite: some step drops or invents them (a max that
  /// turns NaN into its other operand, an exp that turns NaN into +Inf, ...).
  /// Before running such a host region the runtime scans its floating-point
  /// inputs (its constants once, at compile or load) and runs the same region
  /// graph on the native backend instead when one holds NaN or ±Inf. The
  /// runtime keeps such a region's inputs intact until it has run, so that a
  /// region that calls ValueStore::made_non_finite can be run again.
  virtual bool exact_only_for_finite_inputs() const { return false; }
  /// The reduced precision a region node computes in ("bf16"), or "" when it
  /// computes in its values' own types. Read by placement reports.
  virtual std::string node_precision(size_t node) const { return ""; }
  /// Which of several algorithms the backend chose for region node `node` by
  /// measurement when it is not the plain one (e.g. a Winograd convolution),
  /// with why, or "". Read by placement reports (the node's note); for a fused
  /// node it is the first member's.
  virtual std::string node_algorithm(size_t node) const { return ""; }
  /// Where the nodes inside region node `node`'s control-flow bodies run (an If's branches, a Loop's or
  /// Scan's body, compiled as models of their own), each named by its path below the node
  /// ("then_branch/Conv_3", "body/If_2/else_branch/Add"); empty where the node has none or they are
  /// interpreted. Read by placement reports.
  virtual std::vector<InnerNodePlacement> node_inner_placement(size_t node) const { return {}; }
  /// Why this backend should not run region node `node` after all, found when
  /// compiling it, or "": e.g. its library has only a slow reference kernel
  /// for it in every layout tried. The core partitions again without the node
  /// here (the placement report gives this reason); where --place or a
  /// tuning record put it here it stays, and the reason becomes a warning.
  /// For a fused node the refusal is recorded for its first member (the
  /// convolution or matmul the fused chain grew from), so the others may
  /// fuse again without it.
  virtual std::string node_refusal(size_t node) const { return ""; }
  /// Caller buffers (I/O binding, runtime/session.h). True when every step of
  /// the region that reads region input `input` reads it correctly from
  /// `view`, a padded row-major strided view (TensorView::strides). Where a
  /// region says no, the runtime hands it a contiguous copy.
  virtual bool reads_strided(size_t input, const TensorView& view) const { return false; }
  /// True when the region writes region output `output` straight into `view`
  /// (the caller's buffer: its shape may be only a guess where the output has
  /// open dims, and it may be strided) and the steps of the region that read
  /// that output read it from there. The region must check, before writing,
  /// that the shape it computes is view's, and fail with a user error naming
  /// the output otherwise. Where a region says no (the default), the output is
  /// made in the run's memory and copied into the caller's buffer afterwards.
  virtual bool writes_into(size_t output, const TensorView& view) const { return false; }
};

struct CompiledRegion {
  std::vector<uint8_t> payload;  // stored in the artifact, handed back to load()
  std::unique_ptr<ExecutableRegion> executable;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  /// Version of the payload format: load() accepts payloads of this version only.
  virtual std::string version() const = 0;
  /// What a compiled payload depends on (library version, CPU features). An
  /// artifact whose region was built for another compatibility string is refused.
  virtual std::string compatibility() const = 0;
  /// Null for host memory.
  virtual MemorySpace* memory_space() const { return nullptr; }
  /// True when the backend runs a region as a whole: it reads only the
  /// region's inputs and writes only its outputs through the ValueStore, and
  /// keeps what it computes in between to itself (plug-ins). The runtime then
  /// plans no memory for the region's inner values, and keeps its inputs and
  /// outputs apart for the whole region.
  virtual bool opaque_regions() const { return false; }
  /// "" when the backend computes the nodes the core marks for bfloat16
  /// (RegionOptions::bf16_nodes) in bf16, else why not (shown in reports).
  virtual std::string bf16_refusal() const { return "backend '" + name() + "' computes in float32 only"; }
  /// What this backend can run: per-op predicates and fused patterns.
  virtual const Declarations& declarations() const = 0;
  /// Compiles a region: a standalone graph whose inputs and outputs are the
  /// region's boundary values, whose constants are its own, and whose
  /// composite nodes (op "Composite", domain "tessera") hold the fused
  /// patterns this backend declared. Types are static wherever shape
  /// inference could make them so; a model compiled with open dims gives
  /// regions with -1 dims, which a backend either runs for any shape (native)
  /// or specialises per input shape at run time (oneDNN: try_run), keeping
  /// what it prepares per shape in a cache bounded by bytes. The runtime keeps `region` alive as long
  /// as the executable region, which may point into it.
  virtual CompiledRegion compile(const Graph& region, const RegionOptions& options) const = 0;
  /// Rebuilds an executable region from compile()'s payload and the same
  /// region graph (from an artifact). The payload may be hostile: a bad one is
  /// a user error, never a crash.
  virtual std::unique_ptr<ExecutableRegion> load(const Graph& region, std::span<const uint8_t> payload,
                                                 const RegionOptions& options) const = 0;
};

}  // namespace tessera
