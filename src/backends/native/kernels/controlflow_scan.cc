// Kernel of Scan. Scan-9 runs the body once per slice of its scan inputs
// along chosen axes (forward or reversed) and stacks the body's scan outputs
// along chosen axes. Scan-8 is the same per batch entry: every input and
// output has a leading batch axis and scans along axis 1.
#include <algorithm>

#include "backends/native/kernels/controlflow_internal.h"

namespace tessera::native {
namespace {

struct ScanState {
  SubgraphProgram body;
  std::shared_ptr<const CompiledBody> compiled;  // compiled_body.h; null: the interpreter runs `body`
  std::string why;
};

int64_t product(const Shape& shape, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t i = from; i < to; ++i) n *= shape[i];
  return n;
}

/// Slice `t` of `v` along `axis` (that axis removed), copied.
Tensor slice_along(const TensorView& v, size_t axis, int64_t t) {
  Shape shape = v.shape;
  const int64_t len = shape[axis];
  shape.erase(shape.begin() + static_cast<ptrdiff_t>(axis));
  Tensor out(v.dtype, shape);
  const int64_t outer = product(v.shape, 0, axis);
  const size_t inner = static_cast<size_t>(product(v.shape, axis + 1, v.shape.size())) * dtype_size(v.dtype);
  const char* src = static_cast<const char*>(v.data);
  char* dst = static_cast<char*>(out.data());
  for (int64_t o = 0; o < outer; ++o) {
    if (inner) std::memcpy(dst + static_cast<size_t>(o) * inner, src + static_cast<size_t>(o * len + t) * inner, inner);
  }
  return out;
}

/// Stacks `parts` (all of `part_shape`) along a new axis `axis`.
Tensor stack_along(const std::vector<Tensor>& parts, DType dtype, const Shape& part_shape, size_t axis) {
  Shape shape = part_shape;
  const int64_t count = static_cast<int64_t>(parts.size());
  shape.insert(shape.begin() + static_cast<ptrdiff_t>(axis), count);
  Tensor out(dtype, shape);
  const int64_t outer = product(part_shape, 0, axis);
  const size_t inner = static_cast<size_t>(product(part_shape, axis, part_shape.size())) * dtype_size(dtype);
  char* dst = static_cast<char*>(out.data());
  for (int64_t t = 0; t < count; ++t) {
    const char* src = static_cast<const char*>(parts[static_cast<size_t>(t)].data());
    for (int64_t o = 0; o < outer; ++o) {
      if (inner) std::memcpy(dst + static_cast<size_t>(o * count + t) * inner, src + static_cast<size_t>(o) * inner, inner);
    }
  }
  return out;
}

size_t checked_axis(const KernelContext& ctx, int64_t axis, int64_t rank, const char* what, size_t index) {
  if (axis < -rank || axis >= rank) ctx.fail(what, " ", index, " is ", axis, ", outside rank ", rank);
  return static_cast<size_t>(axis < 0 ? axis + rank : axis);
}

struct ScanConfig {
  std::vector<int64_t> in_axes, in_dirs, out_axes, out_dirs;
  size_t num_scan_outputs = 0;
};

/// One unbatched scan (Scan-9 semantics): the final states, then the scan outputs.
std::vector<Tensor> scan_once(const KernelContext& ctx, const SubgraphProgram& program, const CompiledBody* compiled,
                              std::vector<TensorView> states,
                              const std::vector<TensorView>& scans, const std::vector<TensorView>& captures,
                              const ScanConfig& config) {
  std::vector<size_t> axes;
  int64_t length = -1;
  for (size_t j = 0; j < scans.size(); ++j) {
    axes.push_back(checked_axis(ctx, config.in_axes[j], scans[j].rank(), "scan_input_axes", j));
    const int64_t len = scans[j].shape[axes[j]];
    if (length >= 0 && len != length) ctx.fail("scan input ", j, " has length ", len, " but scan input 0 has ", length);
    length = len;
  }
  const size_t n = states.size();
  std::vector<Tensor> state_values;
  std::vector<std::vector<Tensor>> parts(config.num_scan_outputs);
  for (int64_t t = 0; t < length; ++t) {
    std::vector<Tensor> slices;
    for (size_t j = 0; j < scans.size(); ++j) {
      slices.push_back(slice_along(scans[j], axes[j], config.in_dirs[j] ? length - 1 - t : t));
    }
    std::vector<TensorView> inputs = states;
    for (const Tensor& s : slices) inputs.push_back(s.view());
    inputs.insert(inputs.end(), captures.begin(), captures.end());
    std::vector<Tensor> results = compiled ? compiled->run(inputs, {}) : run_subgraph_tensors(ctx, program, inputs);
    if (results.size() != n + config.num_scan_outputs) {
      ctx.fail("body has ", results.size(), " outputs; expected ", n + config.num_scan_outputs);
    }
    state_values.assign(results.begin(), results.begin() + static_cast<ptrdiff_t>(n));
    for (size_t i = 0; i < n; ++i) states[i] = state_values[i].view();
    for (size_t k = 0; k < config.num_scan_outputs; ++k) parts[k].push_back(results[n + k]);
  }
  std::vector<Tensor> out;
  for (const TensorView& s : states) out.push_back(Tensor::from_view(s));
  const Graph& body = *program.graph;
  for (size_t k = 0; k < config.num_scan_outputs; ++k) {
    DType dtype;
    Shape part_shape;
    if (parts[k].empty()) {
      // No slices: a zero-length value of the body's declared slice shape where known.
      const TensorType& t = body.value(body.outputs[n + k]).type;
      dtype = t.dtype == DType::kUndefined ? DType::kFloat32 : t.dtype;
      for (int64_t d : t.dims) part_shape.push_back(d < 0 ? 0 : d);
    } else {
      dtype = parts[k][0].dtype();
      part_shape = parts[k][0].shape();
      for (const Tensor& p : parts[k]) {
        if (p.dtype() != dtype || p.shape() != part_shape) {
          ctx.fail("scan output ", k, " changes from ", dtype_name(dtype), "[", shape_to_string(part_shape), "] to ",
                   dtype_name(p.dtype()), "[", shape_to_string(p.shape()), "] between iterations");
        }
      }
    }
    if (config.out_dirs[k]) std::reverse(parts[k].begin(), parts[k].end());
    const int64_t rank = static_cast<int64_t>(part_shape.size()) + 1;
    out.push_back(stack_along(parts[k], dtype, part_shape, checked_axis(ctx, config.out_axes[k], rank, "scan_output_axes", k)));
  }
  return out;
}

std::vector<int64_t> ints_or_zeros(const KernelContext& ctx, const char* name, size_t count) {
  std::vector<int64_t> v = ctx.attrs().get_ints_or(name, std::vector<int64_t>(count, 0));
  if (v.size() != count) ctx.fail("attribute '", name, "' has ", v.size(), " values, expected ", count);
  return v;
}

std::shared_ptr<void> prepare_scan(const Node& node, const std::vector<const Tensor*>& constants,
                                   const std::vector<TensorType>& types) {
  auto state = std::make_shared<ScanState>();
  state->body = compile_subgraph(graph_attr(node, "body"));
  // Compiled (compiled_body.h) for Scan-9 whose slices' types follow from the inputs': the states at their
  // types, each scan input without its scan axis, then the captures (constants compiled in).
  if (node.opset < 9) {
    state->why = "Scan-8 runs per batch entry";
    return state;
  }
  const size_t formal = formal_inputs_of(node);
  const size_t num_scan = static_cast<size_t>(node.attrs.get_int_or("num_scan_inputs", 0));
  if (types.size() != node.inputs.size() || num_scan > formal || state->body.graph->inputs.size() != types.size()) {
    state->why = "its inputs do not match the node's";
    return state;
  }
  const size_t n = formal - num_scan;
  std::vector<TensorType> body_types(types.begin(), types.end());
  const std::vector<int64_t> axes = node.attrs.get_ints_or("scan_input_axes", std::vector<int64_t>(num_scan, 0));
  for (size_t j = 0; j < num_scan; ++j) {
    TensorType& t = body_types[n + j];
    const int64_t rank = t.rank();
    if (!t.rank_known || axes.size() != num_scan || axes[j] < -rank || axes[j] >= rank) {
      state->why = str_cat("the shape of scan input ", j, " is not known before running");
      return state;
    }
    const size_t axis = static_cast<size_t>(axes[j] < 0 ? axes[j] + rank : axes[j]);
    t.dims.erase(t.dims.begin() + static_cast<ptrdiff_t>(axis));
    if (axis < t.symbols.size()) t.symbols.erase(t.symbols.begin() + static_cast<ptrdiff_t>(axis));
  }
  std::vector<const Tensor*> body_constants(types.size(), nullptr);
  for (size_t i = formal; i < constants.size() && i < body_constants.size(); ++i) body_constants[i] = constants[i];
  state->compiled =
      try_compile_body(*state->body.graph, body_types, body_constants, state->body.kinds, &state->why, BodyUse::kPerTrip);
  if (state->compiled) {
    const std::vector<TensorType>& outputs = state->compiled->output_types();
    for (size_t i = 0; i < n; ++i) {
      if (i < outputs.size() && fits(body_types[i], outputs[i])) continue;
      state->compiled = nullptr;
      state->why = str_cat("state ", i, " changes its type between iterations");
      break;
    }
  }
  return state;
}

std::vector<std::pair<std::string, const CompiledBody*>> scan_bodies(const void* state) {
  return {{"body", static_cast<const ScanState*>(state)->compiled.get()}};
}

std::string describe_scan(const void* state) {
  const auto* s = static_cast<const ScanState*>(state);
  return describe_body(s->compiled.get(), s->why);
}

void scan_kernel(KernelContext& ctx) {
  const bool batched = ctx.opset() < 9;
  const size_t first = batched ? 1 : 0;
  const size_t formal = formal_inputs(ctx);
  const size_t num_scan = static_cast<size_t>(ctx.attrs().get_int("num_scan_inputs"));
  const size_t n = formal - first - num_scan;
  SubgraphProgram local;
  const SubgraphProgram* program = nullptr;
  const CompiledBody* compiled = nullptr;
  if (const ScanState* state = ctx.state<ScanState>()) {
    program = &state->body;
    compiled = state->compiled.get();
  } else {
    local = compile_subgraph(graph_attr(ctx.node(), "body"));
    program = &local;
  }
  ScanConfig config;
  config.num_scan_outputs = ctx.num_outputs() - n;
  std::vector<TensorView> states, scans;
  for (size_t i = 0; i < n; ++i) states.push_back(ctx.input(first + i));
  for (size_t j = 0; j < num_scan; ++j) scans.push_back(ctx.input(first + n + j));
  const std::vector<TensorView> captures = captured_views(ctx, formal);
  if (!batched) {
    config.in_axes = ints_or_zeros(ctx, "scan_input_axes", num_scan);
    config.in_dirs = ints_or_zeros(ctx, "scan_input_directions", num_scan);
    config.out_axes = ints_or_zeros(ctx, "scan_output_axes", config.num_scan_outputs);
    config.out_dirs = ints_or_zeros(ctx, "scan_output_directions", config.num_scan_outputs);
    std::vector<Tensor> results = scan_once(ctx, *program, compiled, states, scans, captures, config);
    for (size_t i = 0; i < results.size(); ++i) write_output(ctx, i, results[i].view());
    return;
  }
  // Scan-8: per batch entry, scan axis 0 of the entry (axis 1 of the input).
  config.in_axes.assign(num_scan, 0);
  config.in_dirs = ints_or_zeros(ctx, "directions", num_scan);
  config.out_axes.assign(config.num_scan_outputs, 0);
  config.out_dirs.assign(config.num_scan_outputs, 0);
  const TensorView& x0 = scans[0];
  if (x0.rank() < 2) ctx.fail("scan input 0 must have a batch and a sequence axis, got shape ", shape_to_string(x0.shape));
  const int64_t batch = x0.shape[0];
  if (ctx.has_input(0)) {
    const TensorView& lens = ctx.input(0);
    for (int64_t b = 0; b < lens.numel(); ++b) {
      if (view_int_at(lens, b) != x0.shape[1]) {
        throw_unsupported(ctx.node().describe(), ": sequence_lens shorter than the sequence axis (", view_int_at(lens, b),
                          " < ", x0.shape[1], ") are not supported");
      }
    }
  }
  std::vector<std::vector<Tensor>> per_output(ctx.num_outputs());
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<Tensor> held;
    std::vector<TensorView> states_b, scans_b;
    for (const TensorView& s : states) held.push_back(slice_along(s, 0, b)), states_b.push_back(held.back().view());
    for (const TensorView& s : scans) held.push_back(slice_along(s, 0, b)), scans_b.push_back(held.back().view());
    std::vector<Tensor> results = scan_once(ctx, *program, nullptr, states_b, scans_b, captures, config);
    for (size_t i = 0; i < results.size(); ++i) per_output[i].push_back(results[i]);
  }
  for (size_t i = 0; i < per_output.size(); ++i) {
    if (per_output[i].empty()) ctx.fail("a batch of 0 entries is not supported");
    const Tensor& p = per_output[i][0];
    write_output(ctx, i, stack_along(per_output[i], p.dtype(), p.shape(), 0).view());
  }
}

}  // namespace

void register_scan_kernel(KernelRegistry& registry) {
  registry.add({.op_type = "Scan", .run = scan_kernel, .prepare = prepare_scan, .allocates_outputs = true,
                .describe = describe_scan, .bodies = scan_bodies});
}

}  // namespace tessera::native
