// The control-flow kernels' subgraph interpreter: runs a subgraph's nodes in
// order with the native kernels, allocating every value at run time (each
// node's shape inference runs on the actual inputs).
#pragma once
#include <cstring>
#include <optional>
#include <vector>

#include "backends/native/compiled_body.h"
#include "backends/native/node_runner.h"

namespace tessera::native {

/// A subgraph with its nodes' schemas and kernels looked up.
struct SubgraphProgram {
  const Graph* graph = nullptr;
  std::vector<CompiledNode> nodes;
  /// Per subgraph value: whether it is a tensor or a sequence / optional
  /// (inferred from the input types compile_subgraph was given).
  std::vector<ValueKind> kinds;
};

/// A value bound to or made by a subgraph: a tensor, or a sequence or optional (box).
struct SubgraphValue {
  TensorView view;             // tensors (inputs: read in place)
  Tensor tensor;               // tensors made by the subgraph (outputs: deep copies)
  const BoxedValue* box = nullptr;  // inputs: a sequence or optional
  std::optional<BoxedValue> made_box;  // outputs: a sequence or optional
  bool boxed() const { return box || made_box; }
  const BoxedValue& boxed_value() const { return box ? *box : *made_box; }
};

/// Throws unsupported naming the first node the native backend cannot run.
/// `input_types` (formal inputs then captures; may be shorter, or hold
/// undefined types) say which inputs are sequences or optionals, from which
/// the kinds of the subgraph's values follow.
SubgraphProgram compile_subgraph(const Graph& graph, const std::vector<TensorType>& input_types = {});

/// Runs `program` with its graph inputs bound to `inputs` (formal inputs then
/// captures) and returns deep copies of its outputs. Boxes the caller owns
/// (made_box) are moved in, and output boxes are moved out, so a Loop that
/// carries a sequence never copies it (see CompiledNode::movable_inputs).
std::vector<SubgraphValue> run_subgraph(const SubgraphProgram& program, std::vector<SubgraphValue> inputs,
                                        ThreadPool& pool);

/// The types of a node's inputs at run time (for compiling its subgraphs
/// then): tensors' dtype and shape, boxes' kind.
std::vector<TensorType> run_time_input_types(const KernelContext& ctx, size_t first);

/// The placement note's words for one body: where its compiled nodes run, or why it is interpreted.
inline std::string body_note(const char* name, const CompiledBody* compiled, const std::string& why) {
  return compiled ? str_cat(name, " compiled: ", compiled->summary()) : str_cat(name, " interpreted on native (", why, ")");
}

/// A Loop's or Scan's placement note: "" where no compile was in progress when it was prepared.
inline std::string describe_body(const CompiledBody* compiled, const std::string& why) {
  if (!compiled && why == kNoBodyCompiler) return "";
  return body_note("body", compiled, why);
}

/// True when a carried output of type `out` fits the type `in` its input was compiled with: the same
/// dtype and rank, and every dim the input fixes fixed to the same size.
inline bool fits(const TensorType& in, const TensorType& out) {
  if (in.dtype != out.dtype || !out.rank_known || in.dims.size() != out.dims.size()) return false;
  for (size_t d = 0; d < in.dims.size(); ++d) {
    if (in.dims[d] >= 0 && in.dims[d] != out.dims[d]) return false;
  }
  return true;
}

/// Registers Scan (controlflow_scan.cc).
void register_scan_kernel(KernelRegistry& registry);

// Helpers shared by the If, Loop and Scan kernels.

inline const Graph& graph_attr(const Node& node, const std::string& name) {
  const Attribute* a = node.attrs.find(name);
  if (!a || a->kind != Attribute::Kind::kGraph || !a->graph) {
    throw_user_error(node.describe(), ": attribute '", name, "' must be a subgraph");
  }
  return *a->graph;
}

/// The node's formal inputs (the rest are its subgraphs' captures), from the node itself (prepare time).
inline size_t formal_inputs_of(const Node& node) {
  return static_cast<size_t>(node.attrs.get_int_or("tessera_formal_inputs", static_cast<int64_t>(node.inputs.size())));
}

inline size_t formal_inputs(const KernelContext& ctx) {
  return static_cast<size_t>(ctx.attrs().get_int_or("tessera_formal_inputs", static_cast<int64_t>(ctx.num_inputs())));
}

/// Node input i as a subgraph value (a tensor view or a box).
inline SubgraphValue input_value(const KernelContext& ctx, size_t i) {
  SubgraphValue v;
  if (const BoxedValue* box = ctx.boxed_input(i)) {
    v.box = box;
  } else {
    v.view = ctx.input(i);
  }
  return v;
}

/// Tensor-only captures (Scan): a sequence or optional capture is refused.
inline std::vector<TensorView> captured_views(const KernelContext& ctx, size_t first) {
  std::vector<TensorView> out;
  for (size_t i = first; i < ctx.num_inputs(); ++i) {
    if (ctx.boxed_input(i)) ctx.fail("input ", i, " is ", value_kind_phrase(ctx.boxed_input(i)->kind), "; this op's subgraph takes tensors only");
    out.push_back(ctx.input(i));
  }
  return out;
}

/// run_subgraph for subgraphs of tensors only (Scan).
inline std::vector<Tensor> run_subgraph_tensors(const KernelContext& ctx, const SubgraphProgram& program,
                                                const std::vector<TensorView>& inputs) {
  std::vector<SubgraphValue> values(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) values[i].view = inputs[i];
  std::vector<Tensor> out;
  for (SubgraphValue& v : run_subgraph(program, values, ctx.pool())) {
    if (v.boxed()) ctx.fail("the body made ", value_kind_phrase(v.boxed_value().kind), " where a tensor is expected");
    out.push_back(std::move(v.tensor));
  }
  return out;
}

inline std::vector<SubgraphValue> captured_values(const KernelContext& ctx, size_t first) {
  std::vector<SubgraphValue> out;
  for (size_t i = first; i < ctx.num_inputs(); ++i) out.push_back(input_value(ctx, i));
  return out;
}

/// Writes `value` to output i, allocating it when the planned view does not fit.
inline void write_output(const KernelContext& ctx, size_t i, const TensorView& value) {
  if (ctx.boxed_output(i)) ctx.fail("output ", i, " is a sequence or optional, but a tensor was computed for it");
  if (!ctx.has_output(i)) return;
  TensorView& out = ctx.output(i);
  if (!out.data || out.dtype != value.dtype || out.shape != value.shape) {
    ctx.allocate_output(i, value.dtype, value.shape);
  }
  if (value.nbytes()) std::memcpy(out.data, value.data, value.nbytes());
}

/// Writes a subgraph value (tensor or box) to output i; the kinds must agree.
inline void write_output(const KernelContext& ctx, size_t i, const SubgraphValue& value) {
  BoxedValue* out = ctx.boxed_output(i);
  if (!value.boxed()) return write_output(ctx, i, value.tensor.defined() ? value.tensor.view() : value.view);
  if (!out) {
    if (!ctx.has_output(i)) return;
    ctx.fail("output ", i, " is a tensor, but ", value_kind_phrase(value.boxed_value().kind), " was computed for it");
  }
  *out = value.boxed_value();
}

}  // namespace tessera::native
