// Kernels of the control-flow family: If and Loop (Scan is in controlflow_scan.cc). Subgraphs run through the
// interpreter in controlflow_subgraph.cc; their captured outer values are the
// node's inputs after `tessera_formal_inputs` (see src/ir/ops/controlflow.cc).
#include <array>
#include <limits>

#include "backends/native/kernels/controlflow_internal.h"
#include "ir/shape_util.h"

namespace tessera::native {
namespace {

/// Programs built once in prepare; nested control flow (no prepare) builds them per run. A branch
/// compiled like a model (compiled_body.h) runs that way; `*_why` says why one is interpreted.
struct IfState {
  SubgraphProgram then_branch;
  SubgraphProgram else_branch;
  std::shared_ptr<const CompiledBody> then_compiled;
  std::shared_ptr<const CompiledBody> else_compiled;
  std::string then_why;
  std::string else_why;
};
struct LoopState {
  SubgraphProgram body;
  std::shared_ptr<const CompiledBody> compiled;  // compiled_body.h; null: the interpreter runs `body`
  std::string why;
};

bool scalar_bool(const KernelContext& ctx, const TensorView& v, const char* what) {
  if (v.dtype != DType::kBool) ctx.fail(what, " must be bool, got ", dtype_name(v.dtype));
  if (v.numel() != 1) ctx.fail(what, " must hold one value, got shape ", shape_to_string(v.shape));
  return *static_cast<const uint8_t*>(v.data) != 0;
}

/// The types of a node's inputs from `first` on (its captures, or a Loop's carried values and captures).
std::vector<TensorType> types_from(const std::vector<TensorType>& input_types, size_t first) {
  return first < input_types.size() ? std::vector<TensorType>(input_types.begin() + static_cast<ptrdiff_t>(first), input_types.end())
                                    : std::vector<TensorType>{};
}

std::shared_ptr<void> prepare_if(const Node& node, const std::vector<const Tensor*>& constants, const std::vector<TensorType>& types) {
  auto state = std::make_shared<IfState>();
  const size_t formal = formal_inputs_of(node);
  const std::vector<TensorType> captures = types_from(types, formal);
  const std::vector<const Tensor*> captured_constants(constants.begin() + static_cast<ptrdiff_t>(std::min(formal, constants.size())),
                                                      constants.end());
  state->then_branch = compile_subgraph(graph_attr(node, "then_branch"), captures);
  state->else_branch = compile_subgraph(graph_attr(node, "else_branch"), captures);
  state->then_compiled =
      try_compile_body(*state->then_branch.graph, captures, captured_constants, state->then_branch.kinds, &state->then_why);
  state->else_compiled =
      try_compile_body(*state->else_branch.graph, captures, captured_constants, state->else_branch.kinds, &state->else_why);
  return state;
}

std::string describe_if(const void* state) {
  const auto* s = static_cast<const IfState*>(state);
  if (!s->then_compiled && !s->else_compiled && s->then_why == kNoBodyCompiler) return "";
  return body_note("then_branch", s->then_compiled.get(), s->then_why) + "; " +
         body_note("else_branch", s->else_compiled.get(), s->else_why);
}

std::vector<std::pair<std::string, const CompiledBody*>> if_bodies(const void* state) {
  const auto* s = static_cast<const IfState*>(state);
  return {{"then_branch", s->then_compiled.get()}, {"else_branch", s->else_compiled.get()}};
}

/// Runs a compiled branch on the node's captures and writes its outputs to the node's, in place where
/// the planned buffer has the compiled output's static type.
void run_compiled_branch(const KernelContext& ctx, const CompiledBody& body, const char* branch_name) {
  const std::vector<TensorType>& types = body.output_types();
  if (types.size() != ctx.num_outputs()) ctx.fail(branch_name, " has ", types.size(), " outputs but the node has ", ctx.num_outputs());
  std::vector<TensorView*> buffers(types.size(), nullptr);
  for (size_t i = 0; i < types.size(); ++i) {
    if (!ctx.has_output(i) || ctx.boxed_output(i)) continue;
    TensorView& out = ctx.output(i);
    if (out.data && types[i].is_static() && out.dtype == types[i].dtype && out.shape == types[i].dims) buffers[i] = &out;
  }
  const std::vector<Tensor> results = body.run(captured_views(ctx, formal_inputs(ctx)), buffers);
  for (size_t i = 0; i < results.size(); ++i) {
    if (!buffers[i] && results[i].defined()) write_output(ctx, i, results[i].view());
  }
}

void if_kernel(KernelContext& ctx) {
  const bool cond = scalar_bool(ctx, ctx.input(0), "cond");
  const char* branch_name = cond ? "then_branch" : "else_branch";
  SubgraphProgram local;
  const SubgraphProgram* program = nullptr;
  if (const IfState* state = ctx.state<IfState>()) {
    if (const CompiledBody* compiled = cond ? state->then_compiled.get() : state->else_compiled.get()) {
      return run_compiled_branch(ctx, *compiled, branch_name);
    }
    program = cond ? &state->then_branch : &state->else_branch;
  } else {
    local = compile_subgraph(graph_attr(ctx.node(), branch_name), run_time_input_types(ctx, formal_inputs(ctx)));
    program = &local;
  }
  std::vector<SubgraphValue> results = run_subgraph(*program, captured_values(ctx, formal_inputs(ctx)), ctx.pool());
  if (results.size() != ctx.num_outputs()) {
    ctx.fail(branch_name, " has ", results.size(), " outputs but the node has ", ctx.num_outputs());
  }
  for (size_t i = 0; i < results.size(); ++i) write_output(ctx, i, results[i]);
}

/// The Loop body's input types: iteration number, cond, then the node's carried values and captures.
std::vector<TensorType> loop_body_types(std::vector<TensorType> carried_and_captures) {
  std::vector<TensorType> out = {TensorType::make(DType::kInt64, {}), TensorType::make(DType::kBool, {})};
  out.insert(out.end(), carried_and_captures.begin(), carried_and_captures.end());
  return out;
}

/// True when each of the body's carried outputs (1 .. carried) fits its carried input's type.
bool carries_its_types(const CompiledBody& body, const std::vector<TensorType>& body_types, size_t carried) {
  const std::vector<TensorType>& outputs = body.output_types();
  if (outputs.size() < 1 + carried) return false;
  for (size_t k = 0; k < carried; ++k) {
    if (!fits(body_types[2 + k], outputs[1 + k])) return false;
  }
  return true;
}

std::shared_ptr<void> prepare_loop(const Node& node, const std::vector<const Tensor*>& constants, const std::vector<TensorType>& types) {
  auto state = std::make_shared<LoopState>();
  std::vector<TensorType> body_types = loop_body_types(types_from(types, 2));
  state->body = compile_subgraph(graph_attr(node, "body"), body_types);
  // Captured constants compile into the body; the carried values' initial values do not (they change).
  const size_t formal = formal_inputs_of(node);
  std::vector<const Tensor*> body_constants(body_types.size(), nullptr);
  for (size_t i = formal; i < constants.size() && i < node.inputs.size(); ++i) body_constants[i] = constants[i];
  if (body_types.size() != state->body.graph->inputs.size()) {
    state->why = "its inputs do not match the node's";
    return state;
  }
  const size_t carried = formal - 2;
  state->compiled =
      try_compile_body(*state->body.graph, body_types, body_constants, state->body.kinds, &state->why, BodyUse::kPerTrip);
  if (state->compiled && !carries_its_types(*state->compiled, body_types, carried)) {
    // A carried value whose shape changes from trip to trip: the dims that change open, compiled again on
    // native (which runs any shape as it comes; oneDNN would prepare its primitives again on every trip).
    const std::vector<TensorType> outputs = state->compiled->output_types();  // (state->compiled may be reset below)
    for (size_t k = 0; k < carried; ++k) {
      TensorType& in = body_types[2 + k];
      const TensorType& out = outputs[1 + k];
      if (fits(in, out)) continue;
      if (in.dtype != out.dtype || !out.rank_known || out.dims.size() != in.dims.size()) {
        state->compiled = nullptr;
        state->why = str_cat("carried value ", k, " changes its type or rank from trip to trip");
        return state;
      }
      in.symbols.resize(in.dims.size());
      for (size_t d = 0; d < in.dims.size(); ++d) {
        if (in.dims[d] == out.dims[d]) continue;
        in.dims[d] = -1;
        in.symbols[d] = "";
      }
    }
    state->compiled =
        try_compile_body(*state->body.graph, body_types, body_constants, state->body.kinds, &state->why,
                         BodyUse::kPerTripNewShapes);
    if (state->compiled && !carries_its_types(*state->compiled, body_types, carried)) {
      state->compiled = nullptr;
      state->why = "its carried values' types do not settle";
    }
  }
  return state;
}

std::vector<std::pair<std::string, const CompiledBody*>> loop_bodies(const void* state) {
  return {{"body", static_cast<const LoopState*>(state)->compiled.get()}};
}

std::string describe_loop(const void* state) {
  const auto* s = static_cast<const LoopState*>(state);
  return describe_body(s->compiled.get(), s->why);
}

/// A scan output's stacked shape: `rows` along a new leading axis before the shape of one trip's part.
Shape stacked_shape(int64_t rows, const Shape& part) {
  Shape shape = {rows};
  shape.insert(shape.end(), part.begin(), part.end());
  return shape;
}

/// Stacks per-iteration values of one scan output along a new leading axis.
void write_scan_output(const KernelContext& ctx, size_t out_index, size_t scan_index,
                       const std::vector<Tensor>& parts, const Graph& body, size_t body_output) {
  if (!ctx.has_output(out_index)) return;
  if (parts.empty()) {
    // No iteration ran: a zero-length value, of the body's declared inner shape where known.
    const TensorType& t = body.value(body.outputs[body_output]).type;
    Shape shape = {0};
    for (int64_t d : t.dims) shape.push_back(d < 0 ? 0 : d);
    ctx.allocate_output(out_index, t.dtype == DType::kUndefined ? DType::kFloat32 : t.dtype, shape);
    return;
  }
  const Tensor& first = parts.front();
  for (size_t k = 1; k < parts.size(); ++k) {
    if (parts[k].dtype() != first.dtype() || parts[k].shape() != first.shape()) {
      ctx.fail("scan output ", scan_index, " is ", dtype_name(first.dtype()), "[", shape_to_string(first.shape()),
               "] in iteration 0 but ", dtype_name(parts[k].dtype()), "[", shape_to_string(parts[k].shape()),
               "] in iteration ", k, "; scan outputs must keep one shape");
    }
  }
  TensorView& out = ctx.allocate_output(out_index, first.dtype(), stacked_shape(static_cast<int64_t>(parts.size()), first.shape()));
  char* dst = static_cast<char*>(out.data);
  for (const Tensor& part : parts) {
    if (part.nbytes()) std::memcpy(dst, part.data(), part.nbytes());
    dst += part.nbytes();
  }
}

/// A compiled Loop body whose output types are all static, each carried one that of its input's view,
/// writes its outputs into buffers of the kernel: the cond into one scalar, each carried value into the
/// one of two buffers its input is not in, each scan output into its row of the stacked result (grown by
/// doubling). `views` are the body's inputs (run_compiled_loop); no tensor is made per trip.
void run_loop_in_place(KernelContext& ctx, const CompiledBody& body, std::vector<TensorView>& views, size_t carried,
                       int64_t max_trips, bool cond) {
  const std::vector<TensorType>& types = body.output_types();
  const size_t scans = types.size() - 1 - carried;
  Tensor cond_out(DType::kBool, {});
  std::vector<TensorView> out_views(types.size());
  std::vector<TensorView*> out_ptrs(types.size());
  for (size_t k = 0; k < types.size(); ++k) {
    out_views[k].dtype = types[k].dtype;
    out_views[k].shape = types[k].dims;
    out_ptrs[k] = &out_views[k];
  }
  out_views[0].data = cond_out.data();
  std::vector<std::array<Tensor, 2>> carry(carried);
  for (size_t k = 0; k < carried; ++k) {
    for (Tensor& t : carry[k]) t = Tensor::uninitialized(types[1 + k].dtype, types[1 + k].dims);
  }
  std::vector<Tensor> stacked(scans);
  std::vector<size_t> part_bytes(scans);
  for (size_t k = 0; k < scans; ++k) {
    part_bytes[k] = static_cast<size_t>(shape_numel(types[1 + carried + k].dims)) * dtype_size(types[1 + carried + k].dtype);
  }
  int64_t capacity = 0, trips = 0;
  for (; trips < max_trips && cond; ++trips) {
    *views[0].as<int64_t>() = trips;
    *views[1].as<uint8_t>() = 1;
    for (size_t k = 0; k < carried; ++k) out_views[1 + k].data = carry[k][trips % 2].data();
    if (trips == capacity) {
      // Room for twice the trips (within M): the rows so far move to the larger buffers.
      capacity = std::min<int64_t>(max_trips, std::max<int64_t>(16, 2 * capacity));
      for (size_t k = 0; k < scans; ++k) {
        const TensorType& t = types[1 + carried + k];
        const Shape shape = stacked_shape(capacity, t.dims);
        check_tensor_size_lazy([&] { return ctx.node().describe() + ": scan output " + std::to_string(k); }, shape, t.dtype);
        Tensor larger = Tensor::uninitialized(t.dtype, shape);
        if (trips > 0 && part_bytes[k]) std::memcpy(larger.data(), stacked[k].data(), part_bytes[k] * static_cast<size_t>(trips));
        stacked[k] = std::move(larger);
      }
    }
    for (size_t k = 0; k < scans; ++k) {
      out_views[1 + carried + k].data = static_cast<char*>(stacked[k].data()) + part_bytes[k] * static_cast<size_t>(trips);
    }
    body.run(views, out_ptrs);
    cond = *cond_out.as<uint8_t>() != 0;
    for (size_t k = 0; k < carried; ++k) views[2 + k].data = out_views[1 + k].data;  // the next trip's input
  }
  for (size_t i = 0; i < carried; ++i) write_output(ctx, i, views[2 + i]);  // (the initial value where no trip ran)
  for (size_t k = 0; k < scans; ++k) {
    if (!ctx.has_output(carried + k)) continue;
    if (ctx.boxed_output(carried + k)) ctx.fail("scan output ", k, " is a sequence or optional; scan outputs must be tensors");
    const TensorType& t = types[1 + carried + k];
    TensorView& out = ctx.allocate_output(carried + k, t.dtype, stacked_shape(trips, t.dims));
    if (trips > 0 && part_bytes[k]) std::memcpy(out.data, stacked[k].data(), part_bytes[k] * static_cast<size_t>(trips));
  }
}

/// The Loop with its body compiled: the body's input views are made once (the iteration number and cond
/// written in place each trip, the captures the same every trip, the carried values' views pointed at the
/// latest trip's outputs), so a trip costs the body's run and little else.
void run_compiled_loop(KernelContext& ctx, const CompiledBody& body, const Graph& graph, size_t formal, int64_t max_trips,
                       bool cond) {
  const size_t carried = formal - 2;
  const size_t scans = ctx.num_outputs() - carried;
  Tensor iteration(DType::kInt64, {});
  Tensor cond_in(DType::kBool, {});
  std::vector<TensorView> views;
  views.reserve(ctx.num_inputs());
  views.push_back(iteration.view());
  views.push_back(cond_in.view());
  for (size_t i = 2; i < ctx.num_inputs(); ++i) {
    if (ctx.boxed_input(i)) ctx.fail("the body was compiled for tensors but got ", value_kind_phrase(ctx.boxed_input(i)->kind));
    views.push_back(ctx.input(i));
  }
  const std::vector<TensorType>& types = body.output_types();
  bool in_place = types.size() == 1 + carried + scans;
  for (size_t k = 0; in_place && k < types.size(); ++k) in_place = types[k].rank_known && types[k].is_static();
  for (size_t k = 0; in_place && k < carried; ++k) {
    in_place = views[2 + k].dtype == types[1 + k].dtype && views[2 + k].shape == types[1 + k].dims && views[2 + k].strides.empty();
  }
  if (in_place) return run_loop_in_place(ctx, body, views, carried, max_trips, cond);
  std::vector<Tensor> values(carried);  // the carried values after the latest trip (their views are in `views`)
  std::vector<std::vector<Tensor>> scan_parts(scans);
  for (int64_t trip = 0; trip < max_trips && cond; ++trip) {
    *iteration.as<int64_t>() = trip;
    *cond_in.as<uint8_t>() = 1;
    std::vector<Tensor> made = body.run(views, {});
    if (made.size() != 1 + carried + scans) ctx.fail("body has ", made.size(), " outputs; expected ", 1 + carried + scans);
    cond = scalar_bool(ctx, made[0].view(), "the body's cond output");
    for (size_t k = 0; k < carried; ++k) {
      values[k] = std::move(made[1 + k]);
      TensorView& view = views[2 + k];
      view.dtype = values[k].dtype();
      view.shape = values[k].shape();  // (same size: no allocation)
      view.data = values[k].data();
    }
    for (size_t k = 0; k < scans; ++k) {
      // The stacked scan output grows with every trip (M comes from a value): stop as soon as it would be too large.
      Tensor& part = made[1 + carried + k];
      check_tensor_size_lazy([&] { return ctx.node().describe() + ": scan output " + std::to_string(k); },
                             stacked_shape(trip + 1, part.shape()), part.dtype());
      scan_parts[k].push_back(std::move(part));
    }
  }
  // (Where no trip ran, the initial values.)
  for (size_t i = 0; i < carried; ++i) write_output(ctx, i, values[i].defined() ? values[i].view() : views[2 + i]);
  for (size_t k = 0; k < scans; ++k) write_scan_output(ctx, carried + k, k, scan_parts[k], graph, 1 + carried + k);
}

void loop_kernel(KernelContext& ctx) {
  const size_t formal = formal_inputs(ctx);
  const size_t carried = formal - 2;
  const size_t scans = ctx.num_outputs() - carried;
  int64_t max_trips = std::numeric_limits<int64_t>::max();
  if (ctx.has_input(0)) {
    const TensorView& m = ctx.input(0);
    if (m.numel() != 1) ctx.fail("M must hold one value, got shape ", shape_to_string(m.shape));
    max_trips = view_int_at(m, 0);
  }
  bool cond = ctx.has_input(1) ? scalar_bool(ctx, ctx.input(1), "cond") : true;
  SubgraphProgram local;
  const SubgraphProgram* program = nullptr;
  if (const LoopState* state = ctx.state<LoopState>()) {
    if (state->compiled) return run_compiled_loop(ctx, *state->compiled, *state->body.graph, formal, max_trips, cond);
    program = &state->body;
  } else {
    local = compile_subgraph(graph_attr(ctx.node(), "body"), loop_body_types(run_time_input_types(ctx, 2)));
    program = &local;
  }
  const std::vector<SubgraphValue> captures = captured_values(ctx, formal);
  std::vector<SubgraphValue> values;  // loop-carried values after the latest iteration
  for (size_t i = 0; i < carried; ++i) values.push_back(input_value(ctx, 2 + i));
  std::vector<std::vector<Tensor>> scan_parts(scans);
  Tensor iteration(DType::kInt64, {});
  Tensor cond_in(DType::kBool, {});
  for (int64_t trip = 0; trip < max_trips && cond; ++trip) {
    *iteration.as<int64_t>() = trip;
    *cond_in.as<uint8_t>() = cond ? 1 : 0;
    std::vector<SubgraphValue> inputs(2);
    inputs[0].view = iteration.view();
    inputs[1].view = cond_in.view();
    // The carried values move into the body (boxes are not copied) and come back as its outputs.
    inputs.insert(inputs.end(), std::make_move_iterator(values.begin()), std::make_move_iterator(values.end()));
    values.clear();
    inputs.insert(inputs.end(), captures.begin(), captures.end());
    std::vector<SubgraphValue> results = run_subgraph(*program, std::move(inputs), ctx.pool());
    if (results.size() != 1 + carried + scans) {
      ctx.fail("body has ", results.size(), " outputs; expected ", 1 + carried + scans);
    }
    if (results[0].boxed()) ctx.fail("the body's cond output is ", value_kind_phrase(results[0].boxed_value().kind));
    cond = scalar_bool(ctx, results[0].tensor.view(), "the body's cond output");
    values.assign(std::make_move_iterator(results.begin() + 1),
                  std::make_move_iterator(results.begin() + 1 + static_cast<ptrdiff_t>(carried)));
    for (size_t k = 0; k < scans; ++k) {
      // The stacked scan output grows with every trip (M comes from a value): stop as soon as it would be too large.
      if (results[1 + carried + k].boxed()) ctx.fail("scan output ", k, " is a sequence or optional; scan outputs must be tensors");
      const Tensor& part = results[1 + carried + k].tensor;
      check_tensor_size_lazy([&] { return ctx.node().describe() + ": scan output " + std::to_string(k); },
                             stacked_shape(trip + 1, part.shape()), part.dtype());
      scan_parts[k].push_back(part);
    }
  }
  for (size_t i = 0; i < carried; ++i) write_output(ctx, i, values[i]);
  for (size_t k = 0; k < scans; ++k) {
    write_scan_output(ctx, carried + k, k, scan_parts[k], *program->graph, 1 + carried + k);
  }
}

}  // namespace

void register_controlflow_kernels(KernelRegistry& registry) {
  registry.add({.op_type = "If", .run = if_kernel, .prepare = prepare_if, .allocates_outputs = true, .describe = describe_if,
                .bodies = if_bodies});
  registry.add({.op_type = "Loop", .run = loop_kernel, .prepare = prepare_loop, .allocates_outputs = true,
                .describe = describe_loop, .bodies = loop_bodies});
  register_scan_kernel(registry);
}

}  // namespace tessera::native
