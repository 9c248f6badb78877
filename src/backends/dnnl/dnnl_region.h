// The executable form of a oneDNN region (see dnnl_region.cc).
#pragma once
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/dnnl/dnnl_internal.h"

namespace tessera::dnnl_backend {

/// Constants in the layouts primitives chose (and Winograd's transformed
/// weights), shared by the per-shape regions of one region compiled with open
/// dims (dnnl_open_region.cc): the layout oneDNN picks for weights does not
/// depend on the batch or spatial size, so a new shape reuses them.
struct SharedConstants {
  struct Reordered {
    std::string slot_key;
    memory::desc desc;
    memory data;
    std::shared_ptr<Buffer> storage;  // data's bytes
  };
  struct Winograd {
    std::string slot_key;
    int64_t block, in_blocks, out_blocks;
    std::shared_ptr<const Buffer> weights;
  };
  std::mutex mutex;
  std::vector<Reordered> reordered;
  std::vector<Winograd> winograd;
};

class DnnlRegion : public ExecutableRegion {
 public:
  /// Checks the program against the region graph (a hostile payload is a user
  /// error), creates every primitive and reorders the constants.
  /// `shared` (optional, outliving the region): constants are looked up there
  /// first and added to it, instead of being reordered for this region alone.
  /// `measure_step_threads`: steps of modest work are timed on one thread and on the session's,
  /// in the region's own order, and each runs on the faster (choose_step_threads).
  DnnlRegion(const Graph& region, Program program, const dnnl::engine& engine, int num_threads,
             SharedConstants* shared = nullptr, bool measure_step_threads = false);
  ~DnnlRegion() override;
  void run(ValueStore& store) const override { run_in(store, nullptr); }
  /// Runs with the intermediates and scratchpad in `workspace` (workspace_bytes()
  /// of it, 64-byte aligned), or in a workspace of the region's own when null.
  void run_in(ValueStore& store, void* workspace) const;
  int64_t workspace_bytes() const { return workspace_bytes_; }
  /// True when a step of the program is in finite_only_reason's table. Such
  /// a region watches its threads' overflow and invalid-operation flags while
  /// it runs, and reports a NaN or ±Inf made inside it (made_non_finite).
  bool exact_only_for_finite_inputs() const override { return finite_only_; }
  /// "bf16" for a convolution or matmul node whose step reads bfloat16 sources.
  std::string node_precision(size_t node) const override;
  /// Why a node's step runs on a much slower kernel than another backend has
  /// (slow_kernel_reason: oneDNN's reference kernel on a large tensor, a
  /// gemm:jit float32 matmul below AVX-512), or "".
  std::string node_refusal(size_t node) const override;
  /// "Winograd F(4x4, 3x3), Tessera's kernel" (or oneDNN's) for a convolution
  /// that measured faster that way than directly.
  std::string node_algorithm(size_t node) const override;
  /// Bytes this region holds beyond shared constants and a workspace given to
  /// run_in: constants of its own and an estimate of its primitives' code.
  int64_t footprint_bytes() const;

 private:
  struct CompiledStep {
    dnnl::primitive primitive;
    std::vector<memory::desc> roles;  // layouts the primitive reads and writes, inputs then output
    dnnl::reorder sum_copy;           // copies a sum post-op's operand into the output first
    int32_t sum_slot = -1;
    size_t sum_bytes = 0;  // when the operand already has the output's layout: a plain copy
    bool sum_in_place = false;  // the output shares the operand's memory: nothing to copy
    bool view = false;          // a reshape or contiguous slice whose output is its input's bytes: nothing to run
    std::string unavailable;    // why oneDNN could not create its primitive ("": it could); the node is refused
    int threads = 1;            // created and run with this many (1 for element-wise steps too small to share)
    // A step measured on one thread as well as on the session's (choose_step_threads): its primitive
    // created for one thread (none for steps Tessera's own loops run), and the two times, in ms.
    bool single_candidate = false;
    dnnl::primitive single_primitive;
    double single_ms = 0, team_ms = 0;
    std::optional<ConcatCopyPlan> concat_copy;  // a concat step run as memcpys instead of its primitive
    std::vector<char> concat_in_place;          // per input of a concat copy: written into the output by its producer
    std::optional<MaxPoolPlan> max_pool;        // a max pooling step run as a direct loop instead of its primitive
    std::optional<int64_t> swish;               // an eltwise swish step run by Tessera's loop: its buffer's floats
    std::optional<WinogradPlan> winograd;       // a 3x3 convolution run by Tessera's Winograd kernel
    std::shared_ptr<const Buffer> winograd_weights;  // its transformed weights (64-byte aligned)
  };
  /// What one concurrent run needs: a stream, the workspace, memory objects.
  struct RunContext {
    explicit RunContext(const dnnl::engine& engine) : stream(engine) {}
    dnnl::stream stream;
    std::unique_ptr<Buffer> workspace;  // null where run_in is given one
    memory scratchpad;
    std::vector<memory> slots;
    std::vector<std::unordered_map<int, memory>> args;  // per step
  };
  /// `own_workspace`: with a workspace of its own; else its intermediates and
  /// scratchpad are pointed at run_in's on every run.
  std::unique_ptr<RunContext> make_context(bool own_workspace) const;
  /// Points the memory objects of roles read through a view at their slots' data.
  void bind_views(RunContext& context) const;
  /// Runs step k on `threads` threads: its primitive, or its one-thread primitive where
  /// `threads` differs from the step's own count.
  void execute_step(size_t k, RunContext& context, int threads) const;
  /// Times each single_candidate step on one thread and on the session's within runs of the
  /// whole region (dnnl_step_threads.cc) and keeps the faster.
  void choose_step_threads();

  const Graph& region_;
  Program program_;
  dnnl::engine engine_;
  int num_threads_;
  int team_threads_ = 1;  // the most threads a step runs on
  // Where choose_step_threads put the whole region on one thread: whole runs' medians that way and
  // on the session's threads (the faster of every step on them and the per-step mix), in ms; else 0.
  double whole_one_ms_ = 0, whole_team_ms_ = 0;
  // Per step: a convolution whose stored plan named oneDNN's Winograd, made direct for a session
  // of more than one thread (the constructor).
  std::vector<char> winograd_made_direct_;
  std::unordered_map<int32_t, std::string> slow_kernels_;  // region node -> why its kernel is too slow (node_refusal)
  bool finite_only_ = false;
  std::vector<memory::desc> descs_;  // per slot
  std::vector<CompiledStep> steps_;
  std::vector<memory> constants_;    // per slot (constant slots only; empty for weights only Winograd steps read)
  std::vector<std::shared_ptr<Buffer>> constant_storage_;  // the bytes of constants_ not in SharedConstants
  std::vector<int64_t> offsets_;     // per slot: workspace offset of intermediates
  int64_t workspace_bytes_ = 0;
  int64_t own_constant_bytes_ = 0;
  int64_t scratchpad_offset_ = 0;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<RunContext>> free_contexts_;
};

/// Which configuration of a region's candidate steps choose_step_threads keeps, from the medians of
/// whole runs: every step on the session's threads (`team`), the per-step choice (`mixed`, where
/// some step chose one thread) and every step on one (`one`, in a small region). A contender other
/// than the team must be at least 5% faster than it (the one-thread form also faster than a kept mix).
enum class StepThreadsConfig { kTeam, kMixed, kOne };
StepThreadsConfig pick_step_threads_config(double team, std::optional<double> mixed, std::optional<double> one);

}  // namespace tessera::dnnl_backend
