// The contract between the core and a backend (see docs/architecture.md).
// A backend says which nodes it can run (and why not), and compiles a region
// of the graph it is given into an executable region. It knows nothing of
// other backends, the artifact layout or the CLI. Backends propose; the core
// (partitioner, runtime) decides.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

struct SupportDecision {
  bool supported = false;
  std::string reason;  // why not, when unsupported
};

/// Per-run access to values, implemented by the runtime. All values live in
/// host memory for now; a backend with its own memory space gets copies
/// inserted by the runtime at region boundaries.
class ValueStore {
 public:
  virtual ~ValueStore() = default;
  /// The view of a value that is already computed (input, constant, or an
  /// earlier node's output).
  virtual const TensorView& get(ValueId id) = 0;
  /// The view an output will be written to. When the plan knows the shape,
  /// data points at planned memory; otherwise data is null and the backend
  /// must set dtype/shape and call allocate().
  virtual TensorView& output(ValueId id) = 0;
  virtual void allocate(ValueId id) = 0;
  /// True when the caller asked for per-node times: the backend then reports
  /// each node it ran through node_finished (index into graph.nodes).
  virtual bool profiling() const { return false; }
  virtual void node_finished(size_t node_index, double milliseconds) {}
};

struct RegionOptions {
  int num_threads = 1;
};

class ExecutableRegion {
 public:
  virtual ~ExecutableRegion() = default;
  virtual void run(ValueStore& store) const = 0;
  /// Per-node profile hook: the nodes this region runs, in order.
  virtual std::vector<size_t> node_indices() const = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::string version() const = 0;
  /// What a compiled payload depends on (library version, CPU features).
  virtual std::string compatibility() const = 0;
  virtual SupportDecision supports(const Graph& graph, const Node& node) const = 0;
  /// Compiles the given nodes (indices into graph.nodes, topologically ordered).
  /// The graph has static types wherever shape inference could give them.
  virtual std::unique_ptr<ExecutableRegion> compile(const Graph& graph, const std::vector<size_t>& nodes,
                                                    const RegionOptions& options) const = 0;
};

}  // namespace tessera
