// A compiled model: the optimised graph, its regions compiled by backends, the
// memory plan and the constants. Immutable after compile(); run() may be
// called from several threads at once.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/graph.h"
#include "runtime/memory_plan.h"

namespace tessera {

struct CompileOptions {
  std::map<std::string, Shape> input_shapes;  // by input name or symbolic dim name
  int num_threads = 1;
};

struct ValueDesc {
  std::string name;
  DType dtype = DType::kUndefined;
  Shape shape;  // -1 where not known before running
};

struct NodePlacement {
  std::string node_name;
  std::string op_type;
  std::string backend;  // "native", ...; "folded" for nodes evaluated at compile time
  std::string note;     // e.g. "fused into 'conv_3'", "computed at compile time"
};

class CompiledModel {
 public:
  /// Runs the compile pipeline on `graph` (straight from a frontend).
  static std::unique_ptr<CompiledModel> compile(Graph graph, const CompileOptions& options);
  ~CompiledModel();

  const std::vector<ValueDesc>& inputs() const { return inputs_; }
  const std::vector<ValueDesc>& outputs() const { return outputs_; }
  const Graph& graph() const { return graph_; }
  const MemoryPlan& memory_plan() const { return memory_plan_; }
  const std::vector<NodePlacement>& placement() const { return placement_; }
  int64_t constant_bytes() const;
  /// Elements in the model's initializers, as imported (before folding).
  int64_t parameter_count() const { return parameter_count_; }

  /// Runs on inputs given in model input order (the data is read in place).
  /// For each output, caller_outputs[i] (when given and non-null) is written
  /// in place and must have the output's dtype and shape; the other outputs
  /// are returned as owned tensors. Throws a user error on a bad input.
  /// When node_milliseconds is given, it is resized to placement().size()
  /// and each executed node's time is added to its entry (folded nodes: 0).
  std::vector<Tensor> run(const std::vector<TensorView>& inputs,
                          const std::vector<TensorView*>& caller_outputs = {},
                          std::vector<double>* node_milliseconds = nullptr) const;

 private:
  CompiledModel() = default;
  void validate_inputs(const std::vector<TensorView>& inputs) const;
  class ArenaLease;

  Graph graph_;
  std::vector<ValueDesc> inputs_;
  std::vector<ValueDesc> outputs_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::vector<std::unique_ptr<ExecutableRegion>> regions_;
  MemoryPlan memory_plan_;
  std::vector<NodePlacement> placement_;
  // Arenas of finished runs, reused by later ones (one per concurrent run at most).
  mutable std::mutex arena_mutex_;
  mutable std::vector<std::unique_ptr<Buffer>> free_arenas_;
  int64_t parameter_count_ = 0;
};

}  // namespace tessera
