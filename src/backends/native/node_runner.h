// Running one node with its native kernel, shared by the backend's regions
// and the control-flow kernels' subgraph interpreter.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/native/kernel.h"
#include "ir/op_schema.h"

namespace tessera::native {

struct CompiledNode {
  const Node* node = nullptr;
  const OpSchema* schema = nullptr;
  const KernelDef* kernel = nullptr;
  std::shared_ptr<void> state;
  bool outputs_static = false;  // every output's type is fully known at compile time
  /// Outputs fixed at compile time while an input is open (Mul([n, len], [6]) planned as [n, 6]): each run
  /// infers the outputs from the inputs it got and refuses shapes the plan does not fit, naming the node.
  bool check_static_outputs = false;
  /// The outputs' value names (where not static, or checked), for messages about a caller's buffer.
  std::vector<std::string> output_names;
  /// Per input / output: 1 where the value is a sequence or an optional (from
  /// the graph's types); such a node's kernel allocates its tensor outputs.
  std::vector<char> boxed_inputs;
  std::vector<char> boxed_outputs;
  /// Per input (or empty): 1 where this node is the box's last reader, so its
  /// kernel may take the box over (KernelContext::take_boxed_input). Set by the
  /// subgraph interpreter, where a Loop body's SequenceInsert then appends in place.
  std::vector<char> movable_inputs;
};

/// Fills cn.boxed_inputs / boxed_outputs from `graph`'s value types.
void mark_boxed_values(CompiledNode& cn, const Graph& graph);

/// True when `cn`'s kernel reads its input `index` correctly from `view`, a
/// strided (padded row-major) view: Concat (any input), MatMul's B where each
/// matrix's rows are contiguous (a key/value cache read by attention), and ops
/// that read shapes only.
bool reads_strided_input(const CompiledNode& cn, size_t index, const TensorView& view);

/// Runs one node: gathers views, infers shapes when needed, calls the kernel.
void run_node(const CompiledNode& cn, ValueStore& store, ThreadPool& pool);

}  // namespace tessera::native
