// A oneDNN region compiled with open dims (see dnnl_open_region.cc).
#pragma once
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/dnnl/dnnl_region.h"

namespace tessera::dnnl_backend {

/// The payload of a region compiled with open dims: this marker and nothing
/// else (the region graph, in the artifact, is the plan).
std::vector<uint8_t> open_region_payload();
bool is_open_region_payload(std::span<const uint8_t> payload);

/// Default bound of the bytes all open regions of the process keep per shape; TESSERA_SHAPE_CACHE_MB overrides it.
inline constexpr int64_t kDefaultShapeCacheBytes = int64_t{32} << 20;

/// The region nodes that run better on native with open dims than in this
/// region, whatever the sizes (node index -> why), decided from the graph
/// alone: a product of two computed operands whose second has open dims
/// (attention over a growing cache: a primitive per length, and a bound cache
/// only through a copy), and light nodes of open dims connected to none of the
/// region's products (nothing fuses with them, and their own sizes would make
/// the region lower again). Part of node_refusal.
std::map<int32_t, std::string> shape_refusals(const Graph& region);

/// Why a float32 product of open rows against large constant weights runs on native (check_matmul and
/// check_gemm, dnnl_declarations.cc, say why).
inline constexpr char kOpenRowsProductRefusal[] =
    "with open rows, a product against constant weights: native packs them once and runs every row count from "
    "that copy (a decoder's prompt and its single tokens alike)";
/// Why a product of two computed operands whose second has open dims runs on native: shape_refusals'
/// reason, and the declarations' (check_matmul), which say it before any region is compiled.
inline constexpr char kOpenDimsProductRefusal[] =
    "with open dims, a product of two computed operands (attention over a growing cache): native runs it at every "
    "length without a oneDNN primitive for each, and reads a bound cache in place";

class OpenDnnlRegion : public ExecutableRegion {
 public:
  /// `probe_input_dims` (when compiling, RegionOptions'; empty when loading an
  /// artifact): the region is lowered once at them, to find the nodes oneDNN
  /// would run on a much slower kernel than another backend has at such sizes
  /// (node_refusal), so that the core places them elsewhere as it does for a
  /// static region.
  OpenDnnlRegion(const Graph& region, const dnnl::engine& engine, int num_threads,
                 const std::vector<Shape>& probe_input_dims);
  ~OpenDnnlRegion() override;
  /// As try_run; a shape oneDNN cannot run is an unsupported error here.
  void run(ValueStore& store) const override;
  bool try_run(ValueStore& store) const override;
  /// True when this call's input shapes are in the cache (lowered, or refused).
  bool prepared_for(ValueStore& store) const override;
  /// Whether a step needs finite inputs is known per shape: from the probe's
  /// lowering, and true for a region with a convolution (Winograd may be
  /// chosen at a shape) or one that was not probed.
  bool exact_only_for_finite_inputs() const override { return finite_only_; }
  std::string node_algorithm(size_t node) const override;
  std::string node_refusal(size_t node) const override;
  /// A caller's contiguous buffer (I/O binding): written in place once its
  /// shape is checked against the one lowered for the call.
  bool writes_into(size_t output, const TensorView& view) const override { return is_contiguous(view); }

 private:
  /// The region lowered for one set of input shapes, or why it cannot be. Quick (tier 0): its direct
  /// convolutions on oneDNN's JIT kernels that are not brgemm-based (kDirectJit), cheap to create; full
  /// (tier 1): the algorithms measured at the first shape as they were measured, brgemm included. A
  /// shape's first call takes the quick one (the first shape of all, and a shape the runtime asks to
  /// prepare in full, the full one); a shape hit kTierUpCalls times is lowered again in full.
  struct Specialization {
    Graph graph;
    std::unique_ptr<DnnlRegion> region;  // null: runs on native (refusal says why)
    std::string refusal;
    int64_t bytes = 0;
    std::list<std::vector<Shape>>::iterator recency;
    bool quick = false;  // tier 0, with a direct convolution that the full lowering would create otherwise
    int64_t calls = 0;   // cache hits so far (under mutex_)
  };
  static constexpr int64_t kTierUpCalls = 8;
  /// The cached lowering for `dims`, made (`*created`; in full where `full`) or lowered again in full
  /// (`*tiered`) on the way.
  std::shared_ptr<const Specialization> specialization(const std::vector<Shape>& dims, bool* created,
                                                       bool* tiered = nullptr, bool full = false) const;
  std::shared_ptr<Specialization> specialize(const std::vector<Shape>& dims, bool full) const;

  const Graph& region_;
  dnnl::engine engine_;
  int num_threads_;
  int64_t max_bytes_;
  mutable std::mutex mutex_;
  mutable std::map<std::vector<Shape>, std::shared_ptr<Specialization>> cache_;
  mutable std::list<std::vector<Shape>> recency_;  // most recently used first
  mutable SharedConstants constants_;
  /// Workspaces lent to runs (one per concurrent run), each grown to the largest shape it served.
  mutable std::vector<std::unique_ptr<Buffer>> workspaces_;
  mutable AlgorithmMemo algorithms_;
  std::map<int32_t, std::string> probe_refusals_;  // region node -> why (found by the probe)
  bool finite_only_ = true;
};

}  // namespace tessera::dnnl_backend
