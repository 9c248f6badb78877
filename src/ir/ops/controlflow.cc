// Schemas of the control-flow family: If, Loop and Scan.
//
// The importer turns every outer-scope value a subgraph reads into an explicit
// capture: an extra node input after the formal ones (attribute
// `tessera_formal_inputs` says how many inputs are formal) and a matching
// subgraph input after the subgraph's formal inputs. So a subgraph only ever
// reads its own inputs and constants, and shape inference here can run the
// subgraph's node schemas on the node's input types.
#include <algorithm>

#include "ir/op_schema.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

const Graph& subgraph_attr(const InferContext& ctx, const std::string& name) {
  const Attribute* a = ctx.attrs().find(name);
  if (!a || a->kind != Kind::kGraph || !a->graph) ctx.fail("attribute '", name, "' must be a subgraph");
  return *a->graph;
}

size_t formal_inputs(const InferContext& ctx) {
  return static_cast<size_t>(ctx.attrs().get_int_or("tessera_formal_inputs", static_cast<int64_t>(ctx.num_inputs())));
}

/// Types of a subgraph's outputs given its inputs' types, from each node's
/// shape inference in order (constants give values; nothing is folded). When
/// inference cannot get through (an input type not known yet), the types the
/// model declares for the subgraph outputs stand in; the kernel allocates
/// outputs from the values it actually computes either way.
std::vector<TensorType> infer_subgraph_outputs(const Graph& g, const std::vector<TensorType>& inputs) {
  std::vector<TensorType> types(g.values.size());
  std::vector<TensorView> constant_views(g.values.size());
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& v = g.values[i];
    types[i] = v.type;
    if (v.constant) {
      types[i] = TensorType::make(v.constant->dtype(), v.constant->shape());
      constant_views[i] = v.constant->view();
    }
  }
  for (size_t k = 0; k < g.inputs.size() && k < inputs.size(); ++k) {
    if (inputs[k].dtype != DType::kUndefined) types[static_cast<size_t>(g.inputs[k])] = inputs[k];
  }
  std::vector<TensorType> declared;
  for (ValueId id : g.outputs) declared.push_back(g.value(id).type);
  try {
    for (const Node& node : g.nodes) {
      const OpSchema* schema = OpRegistry::instance().find(node.domain, node.op_type);
      if (!schema) return declared;
      std::vector<const TensorType*> in_types(node.inputs.size(), nullptr);
      std::vector<const TensorView*> in_values(node.inputs.size(), nullptr);
      for (size_t i = 0; i < node.inputs.size(); ++i) {
        if (node.inputs[i] == kNoValue) continue;
        const size_t id = static_cast<size_t>(node.inputs[i]);
        if (types[id].dtype == DType::kUndefined) return declared;
        in_types[i] = &types[id];
        if (g.values[id].constant) in_values[i] = &constant_views[id];
      }
      std::vector<TensorType> out_types(node.outputs.size());
      InferContext ctx(node, in_types, in_values, &out_types);
      run_shape_inference(*schema, ctx);
      for (size_t i = 0; i < node.outputs.size(); ++i) {
        if (node.outputs[i] != kNoValue) types[static_cast<size_t>(node.outputs[i])] = out_types[i];
      }
    }
  } catch (const Error&) {
    return declared;  // the run-time inference (with values) reports real errors
  }
  std::vector<TensorType> out;
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    const TensorType& t = types[static_cast<size_t>(g.outputs[i])];
    out.push_back(t.dtype == DType::kUndefined ? declared[i] : t);
  }
  return out;
}

/// The type both `a` and `b` satisfy: dims kept where they agree.
TensorType merge_types(const TensorType& a, const TensorType& b) {
  TensorType out;
  // Kinds: a value that is an optional on one path and its content on the
  // other is an optional; otherwise the known one (b: a Loop body's output).
  out.kind = a.kind == b.kind ? a.kind : (a.is_optional() ? a.kind : (b.is_optional() ? b.kind : b.kind));
  out.dtype = a.dtype != DType::kUndefined ? a.dtype : b.dtype;
  if (a.rank_known && b.rank_known && a.rank() == b.rank()) {
    out.rank_known = true;
    for (size_t d = 0; d < a.dims.size(); ++d) out.dims.push_back(a.dims[d] == b.dims[d] ? a.dims[d] : -1);
  }
  return out;
}

void set_output_type(InferContext& ctx, size_t i, const TensorType& t) {
  if (t.is_static()) return ctx.set_output(i, t.dtype, t.dims);
  ctx.set_output_unknown(i, t.dtype, t.rank_known ? t.rank() : -1);
  if (t.rank_known) ctx.output(i).dims = t.dims;
  ctx.output(i).kind = t.kind;
}

std::vector<TensorType> capture_types(const InferContext& ctx, size_t first) {
  std::vector<TensorType> out;
  for (size_t i = first; i < ctx.num_inputs(); ++i) out.push_back(ctx.has_input(i) ? ctx.input_type(i) : TensorType{});
  return out;
}

void infer_if(InferContext& ctx) {
  const TensorType& cond = ctx.input_type(0);
  if (cond.dtype != DType::kBool) ctx.fail("cond must be bool, got ", dtype_name(cond.dtype));
  const std::vector<TensorType> captures = capture_types(ctx, formal_inputs(ctx));
  const std::vector<TensorType> then_out = infer_subgraph_outputs(subgraph_attr(ctx, "then_branch"), captures);
  const std::vector<TensorType> else_out = infer_subgraph_outputs(subgraph_attr(ctx, "else_branch"), captures);
  if (then_out.size() != ctx.num_outputs() || else_out.size() != ctx.num_outputs()) {
    ctx.fail("the node has ", ctx.num_outputs(), " outputs but then_branch has ", then_out.size(),
             " and else_branch ", else_out.size());
  }
  for (size_t i = 0; i < then_out.size(); ++i) {
    const TensorType& t = then_out[i];
    const TensorType& e = else_out[i];
    if (t.dtype != DType::kUndefined && e.dtype != DType::kUndefined && t.dtype != e.dtype) {
      ctx.fail("output ", i, " is ", dtype_name(t.dtype), " in then_branch but ", dtype_name(e.dtype), " in else_branch");
    }
    set_output_type(ctx, i, merge_types(t, e));
  }
}

void infer_loop(InferContext& ctx) {
  const size_t formal = formal_inputs(ctx);
  if (formal < 2) ctx.fail("Loop needs the inputs M and cond (either may be empty)");
  if (ctx.has_input(0) && ctx.input_type(0).dtype != DType::kInt64) {
    ctx.fail("M must be int64, got ", dtype_name(ctx.input_type(0).dtype));
  }
  if (ctx.has_input(1) && ctx.input_type(1).dtype != DType::kBool) {
    ctx.fail("cond must be bool, got ", dtype_name(ctx.input_type(1).dtype));
  }
  const size_t carried = formal - 2;
  if (ctx.num_outputs() < carried) ctx.fail("has ", carried, " loop-carried inputs but only ", ctx.num_outputs(), " outputs");
  const size_t scans = ctx.num_outputs() - carried;
  const Graph& body = subgraph_attr(ctx, "body");
  if (body.outputs.size() != 1 + carried + scans) {
    ctx.fail("body has ", body.outputs.size(), " outputs; expected ", 1 + carried + scans, " (cond, ", carried,
             " loop-carried, ", scans, " scan outputs)");
  }
  std::vector<TensorType> body_inputs = {TensorType::make(DType::kInt64, {}), TensorType::make(DType::kBool, {})};
  for (size_t i = 2; i < formal; ++i) body_inputs.push_back(ctx.input_type(i));
  for (const TensorType& t : capture_types(ctx, formal)) body_inputs.push_back(t);
  const std::vector<TensorType> out = infer_subgraph_outputs(body, body_inputs);
  for (size_t i = 0; i < carried; ++i) {
    // The value after the loop is the initial one or one the body produced.
    set_output_type(ctx, i, merge_types(ctx.input_type(2 + i), out[1 + i]));
  }
  for (size_t k = 0; k < scans; ++k) {
    const TensorType& t = out[1 + carried + k];
    if (!t.rank_known) {
      ctx.set_output_unknown(carried + k, t.dtype);
      continue;
    }
    ctx.set_output_unknown(carried + k, t.dtype, t.rank() + 1);
    std::copy(t.dims.begin(), t.dims.end(), ctx.output(carried + k).dims.begin() + 1);
  }
}

/// Scan-8 has a leading optional sequence_lens input and a batch axis 0 on
/// every input and output; Scan-9 has neither. Both scan along axes chosen per
/// input and output (always axis 1 in Scan-8).
void infer_scan(InferContext& ctx) {
  const bool batched = ctx.opset() < 9;
  const size_t first = batched ? 1 : 0;
  const size_t formal = formal_inputs(ctx);
  const int64_t num_scan = ctx.attrs().get_int("num_scan_inputs");
  if (num_scan < 1 || static_cast<size_t>(num_scan) + first > formal) {
    ctx.fail("num_scan_inputs is ", num_scan, " but the node has ", formal - first, " state and scan inputs");
  }
  const size_t states = formal - first - static_cast<size_t>(num_scan);
  if (ctx.num_outputs() < states) ctx.fail("has ", states, " state inputs but only ", ctx.num_outputs(), " outputs");
  const Graph& body = subgraph_attr(ctx, "body");
  const size_t scan_outputs = ctx.num_outputs() - states;
  if (body.outputs.size() != states + scan_outputs) {
    ctx.fail("body has ", body.outputs.size(), " outputs; expected ", states + scan_outputs);
  }
  for (size_t i = 0; i < states; ++i) set_output_type(ctx, i, ctx.input_type(first + i));
  const int64_t extra_rank = batched ? 2 : 1;
  for (size_t k = 0; k < scan_outputs; ++k) {
    const TensorType& t = body.value(body.outputs[states + k]).type;
    DType dtype = t.dtype != DType::kUndefined ? t.dtype : ctx.input_dtype(first + states);
    ctx.set_output_unknown(states + k, dtype, t.rank_known ? t.rank() + extra_rank : -1);
  }
}

constexpr int kManyInputs = 1 << 20;  // captures are appended without limit

}  // namespace

void register_controlflow_ops(OpRegistry& registry) {
  registry.add({.op_type = "If", .min_opset = 1, .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
                .max_outputs = kManyInputs,
                .attributes = {{"then_branch", Kind::kGraph, std::nullopt, true},
                               {"else_branch", Kind::kGraph, std::nullopt, true}},
                .infer = infer_if, .data_dependent_output = true, .boxed_values = true});
  registry.add({.op_type = "Loop", .min_opset = 1, .min_inputs = 2, .max_inputs = kManyInputs, .min_outputs = 1,
                .max_outputs = kManyInputs, .attributes = {{"body", Kind::kGraph, std::nullopt, true}},
                .infer = infer_loop, .data_dependent_output = true, .boxed_values = true});
  registry.add({.op_type = "Scan", .min_opset = 8, .min_inputs = 1, .max_inputs = kManyInputs, .min_outputs = 1,
                .max_outputs = kManyInputs,
                .attributes = {{"body", Kind::kGraph, std::nullopt, true},
                               {"num_scan_inputs", Kind::kInt, std::nullopt, true},
                               {"directions", Kind::kInts, std::nullopt},
                               {"scan_input_axes", Kind::kInts, std::nullopt},
                               {"scan_input_directions", Kind::kInts, std::nullopt},
                               {"scan_output_axes", Kind::kInts, std::nullopt},
                               {"scan_output_directions", Kind::kInts, std::nullopt}},
                .infer = infer_scan, .data_dependent_output = true});
}

}  // namespace tessera
