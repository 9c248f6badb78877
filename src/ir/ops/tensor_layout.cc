// Schemas of ops that reorder, cut or join data: Transpose, Concat, Split,
// Slice, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu, CumSum, ReverseSequence.
#include <algorithm>

#include "ir/ops/tensor_internal.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

void infer_transpose(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  if (!in.rank_known) return ctx.set_output_unknown(0, in.dtype);
  std::vector<int64_t> perm = transpose_perm(ctx.node(), in.rank());
  Shape out(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) out[i] = in.dims[static_cast<size_t>(perm[i])];
  ctx.set_output(0, in.dtype, out);
}

/// Concat-1 made axis optional with default 1; from Concat-4 it is required.
/// The default is written into the node here, so every backend reads one axis.
void normalize_concat(Graph&, Node& node) {
  if (node.attrs.has("axis")) return;
  if (node.opset >= 4) throw_user_error(node.describe(), ": attribute 'axis' is required (opset ", node.opset, ")");
  node.attrs.set("axis", Attribute::of_int(1));
}

int64_t concat_axis(const InferContext& ctx) {
  if (!ctx.attrs().has("axis")) ctx.fail("attribute 'axis' is required");  // normalize_concat gives opset 1-3 theirs
  return ctx.attrs().get_int("axis");
}

void infer_concat(InferContext& ctx) {
  const TensorType& first = ctx.input_type(0);
  int64_t axis = concat_axis(ctx);
  int64_t rank = -1;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input_type(i);
    if (t.dtype != first.dtype) ctx.fail("input ", i, " has dtype ", dtype_name(t.dtype), ", input 0 has ", dtype_name(first.dtype));
    if (!t.rank_known) continue;
    if (rank >= 0 && t.rank() != rank) ctx.fail("input ", i, " has rank ", t.rank(), ", expected ", rank);
    rank = t.rank();
  }
  if (rank < 0) return ctx.set_output_unknown(0, first.dtype);
  if (axis < -rank || axis >= rank) ctx.fail("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  Shape out(static_cast<size_t>(rank), -1);
  int64_t total = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input_type(i);
    if (!t.rank_known) {
      total = -1;
      continue;
    }
    for (size_t d = 0; d < out.size(); ++d) {
      if (static_cast<int64_t>(d) == axis) continue;
      if (t.dims[d] < 0) continue;
      if (out[d] >= 0 && out[d] != t.dims[d]) {
        ctx.fail("input ", i, " has shape ", shape_to_string(t.dims), ", which differs from the others off axis ", axis);
      }
      out[d] = t.dims[d];
    }
    const int64_t along = t.dims[static_cast<size_t>(axis)];
    total = (total < 0 || along < 0) ? -1 : total + along;
  }
  out[static_cast<size_t>(axis)] = total;
  ctx.set_output(0, first.dtype, out);
}

void normalize_split(Graph& graph, Node& node) { move_attribute_to_input(graph, node, "split", 1); }

void infer_split(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  if (!in.rank_known) {
    for (size_t i = 0; i < ctx.num_outputs(); ++i) ctx.set_output_unknown(i, in.dtype);
    return;
  }
  const int64_t axis = normalize_axis(ctx.attrs().get_int_or("axis", 0), in.rank());
  std::optional<std::vector<int64_t>> split;
  if (ctx.has_input(1)) {
    split = ctx.input_ints(1);
    if (!split) {
      for (size_t i = 0; i < ctx.num_outputs(); ++i) ctx.set_output_unknown(i, in.dtype, in.rank());
      return;
    }
  }
  std::vector<int64_t> sizes = resolve_split(ctx.node(), in.dims[static_cast<size_t>(axis)], ctx.num_outputs(), split);
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    Shape out = in.dims;
    out[static_cast<size_t>(axis)] = sizes[i];
    ctx.set_output(i, in.dtype, out);
  }
}

void normalize_slice(Graph& graph, Node& node) {
  // Before opset 10 starts/ends/axes were attributes; steps did not exist.
  move_attribute_to_input(graph, node, "starts", 1);
  move_attribute_to_input(graph, node, "ends", 2);
  move_attribute_to_input(graph, node, "axes", 3);
}

void infer_slice(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  if (!ctx.has_input(1) || !ctx.has_input(2)) ctx.fail("starts and ends are required");
  auto starts = ctx.input_ints(1);
  auto ends = ctx.input_ints(2);
  std::optional<std::vector<int64_t>> axes, steps;
  bool known = starts && ends && in.rank_known;
  if (ctx.has_input(3)) known = known && (axes = ctx.input_ints(3)).has_value();
  if (ctx.has_input(4)) known = known && (steps = ctx.input_ints(4)).has_value();
  if (!known) return ctx.set_output_unknown(0, in.dtype, in.rank_known ? in.rank() : -1);
  ctx.set_output(0, in.dtype, resolve_slice(ctx.node(), in.dims, *starts, *ends, axes, steps).output);
}

void infer_tile(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  auto repeats = ctx.input_ints(1);
  if (!repeats || !in.rank_known) return ctx.set_output_unknown(0, in.dtype, in.rank_known ? in.rank() : -1);
  if (static_cast<int64_t>(repeats->size()) != in.rank()) {
    ctx.fail("repeats has ", repeats->size(), " values for an input of rank ", in.rank());
  }
  Shape out = in.dims;
  for (size_t i = 0; i < out.size(); ++i) {
    if ((*repeats)[i] < 0) ctx.fail("repeats value ", (*repeats)[i], " is negative");
    if (out[i] >= 0) out[i] = saturating_mul(out[i], (*repeats)[i]);  // too large: the size check says so
  }
  ctx.set_output(0, in.dtype, out);
}

void normalize_pad(Graph& graph, Node& node) {
  // Before opset 11 pads was an attribute; the `value` attribute stays and the
  // kernel uses it when there is no constant_value input.
  move_attribute_to_input(graph, node, "pads", 1);
}

void infer_pad(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  std::string mode = ctx.attrs().get_string_or("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge") {
    throw_unsupported(ctx.node().describe(), ": pad mode '", mode, "' is not supported (constant, reflect, edge are)");
  }
  if (!ctx.has_input(1)) ctx.fail("pads is required");
  auto pads = ctx.input_ints(1);
  std::optional<std::vector<int64_t>> axes;
  bool known = pads.has_value() && in.rank_known;
  if (ctx.has_input(3)) known = known && (axes = ctx.input_ints(3)).has_value();
  if (!known) return ctx.set_output_unknown(0, in.dtype, in.rank_known ? in.rank() : -1);
  std::vector<int64_t> full = resolve_pads(ctx.node(), in.rank(), *pads, axes);
  Shape out = in.dims;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] < 0) continue;
    const int64_t begin = full[i], end = full[i + out.size()];
    // Exact, in 128 bits: hostile pads must not wrap into a small size.
    const __int128 size = static_cast<__int128>(out[i]) + begin + end;
    if (size < 0 || begin < -in.dims[i] || end < -in.dims[i]) {
      ctx.fail("pads ", begin, ", ", end, " remove more than the ", in.dims[i], " elements of axis ", i);
    }
    out[i] = size > INT64_MAX ? INT64_MAX : static_cast<int64_t>(size);
    if (mode != "constant" && in.dims[i] == 0 && out[i] > 0) ctx.fail(mode, " padding of the empty axis ", i);
  }
  ctx.set_output(0, in.dtype, out);
}

void infer_depth_to_space(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  const int64_t b = ctx.attrs().get_int("blocksize");
  if (b <= 0) ctx.fail("blocksize ", b, " must be positive");
  std::string mode = ctx.attrs().get_string_or("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") ctx.fail("mode '", mode, "' is not DCR or CRD");
  if (!in.rank_known) return ctx.set_output_unknown(0, in.dtype, 4);
  if (in.rank() != 4) ctx.fail("input must be 4-D, it has rank ", in.rank());
  const Shape& d = in.dims;
  const int64_t b2 = saturating_mul(b, b);
  if (d[1] >= 0 && d[1] % b2 != 0) ctx.fail("channels ", d[1], " are not divisible by blocksize^2 = ", b2);
  ctx.set_output(0, in.dtype, {d[0], d[1] < 0 ? -1 : d[1] / b2, d[2] < 0 ? -1 : saturating_mul(d[2], b),
                               d[3] < 0 ? -1 : saturating_mul(d[3], b)});
}

void infer_space_to_depth(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  const int64_t b = ctx.attrs().get_int("blocksize");
  if (b <= 0) ctx.fail("blocksize ", b, " must be positive");
  if (!in.rank_known) return ctx.set_output_unknown(0, in.dtype, 4);
  if (in.rank() != 4) ctx.fail("input must be 4-D, it has rank ", in.rank());
  const Shape& d = in.dims;
  for (size_t i = 2; i < 4; ++i) {
    if (d[i] >= 0 && d[i] % b != 0) ctx.fail("spatial dim ", d[i], " is not divisible by blocksize ", b);
  }
  ctx.set_output(0, in.dtype, {d[0], d[1] < 0 ? -1 : saturating_mul(d[1], saturating_mul(b, b)), d[2] < 0 ? -1 : d[2] / b,
                               d[3] < 0 ? -1 : d[3] / b});
}

void infer_trilu(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  if (in.rank_known && in.rank() < 2) ctx.fail("input must have rank >= 2, it has ", in.rank());
  ctx.output(0) = in;
}

void infer_same_shape(InferContext& ctx) { ctx.output(0) = ctx.input_type(0); }

void infer_reverse_sequence(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  if (in.rank_known) {
    if (in.rank() < 2) ctx.fail("input must have rank >= 2, it has ", in.rank());
    int64_t batch = ctx.attrs().get_int_or("batch_axis", 1), time = ctx.attrs().get_int_or("time_axis", 0);
    if (!((batch == 0 && time == 1) || (batch == 1 && time == 0))) {
      ctx.fail("batch_axis ", batch, " and time_axis ", time, " must be 0 and 1 in some order");
    }
  }
  ctx.output(0) = in;
}

}  // namespace

std::vector<int64_t> transpose_perm(const Node& node, int64_t rank) {
  std::vector<int64_t> perm = node.attrs.get_ints_or("perm", {});
  if (perm.empty() && rank > 0 && !node.attrs.has("perm")) {
    for (int64_t i = rank; i-- > 0;) perm.push_back(i);
  }
  if (static_cast<int64_t>(perm.size()) != rank) {
    throw_user_error(node.describe(), ": perm has ", perm.size(), " values for an input of rank ", rank);
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& p : perm) {
    if (p < -rank || p >= rank) throw_user_error(node.describe(), ": perm value ", p, " is out of range for rank ", rank);
    if (p < 0) p += rank;
    if (seen[static_cast<size_t>(p)]) throw_user_error(node.describe(), ": perm repeats axis ", p);
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

void register_tensor_layout_ops(OpRegistry& registry) {
  registry.add({.op_type = "Transpose", .min_opset = 1, .attributes = {{"perm", Kind::kInts}}, .infer = infer_transpose});
  registry.add({.op_type = "Concat", .min_opset = 1, .min_inputs = 1, .max_inputs = kManyValues,
                .attributes = {{"axis", Kind::kInt}}, .normalize = normalize_concat, .infer = infer_concat});
  registry.add({.op_type = "Split", .min_opset = 1, .min_inputs = 1, .max_inputs = 2, .min_outputs = 1,
                .max_outputs = kManyValues,
                .attributes = {{"axis", Kind::kInt, Attribute::of_int(0)}, {"split", Kind::kInts}},
                .normalize = normalize_split, .infer = infer_split});
  registry.add({.op_type = "Slice", .min_opset = 1, .min_inputs = 1, .max_inputs = 5,
                .attributes = {{"starts", Kind::kInts}, {"ends", Kind::kInts}, {"axes", Kind::kInts}},
                .normalize = normalize_slice, .infer = infer_slice});
  registry.add({.op_type = "Tile", .min_opset = 6, .min_inputs = 2, .max_inputs = 2, .infer = infer_tile});
  registry.add({.op_type = "Pad", .min_opset = 2, .min_inputs = 1, .max_inputs = 4,
                .attributes = {{"mode", Kind::kString, Attribute::of_string("constant")}, {"pads", Kind::kInts},
                               {"value", Kind::kFloat, Attribute::of_float(0.0f)}},
                .normalize = normalize_pad, .infer = infer_pad});
  registry.add({.op_type = "DepthToSpace", .min_opset = 1,
                .attributes = {{"blocksize", Kind::kInt, std::nullopt, true},
                               {"mode", Kind::kString, Attribute::of_string("DCR")}},
                .infer = infer_depth_to_space});
  registry.add({.op_type = "SpaceToDepth", .min_opset = 1,
                .attributes = {{"blocksize", Kind::kInt, std::nullopt, true}}, .infer = infer_space_to_depth});
  registry.add({.op_type = "Trilu", .min_opset = 14, .min_inputs = 1, .max_inputs = 2,
                .attributes = {{"upper", Kind::kInt, Attribute::of_int(1)}}, .infer = infer_trilu});
  registry.add({.op_type = "CumSum", .min_opset = 11, .min_inputs = 2, .max_inputs = 2,
                .attributes = {{"exclusive", Kind::kInt, Attribute::of_int(0)},
                               {"reverse", Kind::kInt, Attribute::of_int(0)}},
                .input_dtypes = {DType::kFloat32, DType::kFloat64, DType::kInt32, DType::kInt64, DType::kUInt32,
                                 DType::kUInt64},
                .infer = infer_same_shape});
  registry.add({.op_type = "ReverseSequence", .min_opset = 10, .min_inputs = 2, .max_inputs = 2,
                .attributes = {{"batch_axis", Kind::kInt, Attribute::of_int(1)},
                               {"time_axis", Kind::kInt, Attribute::of_int(0)}},
                .infer = infer_reverse_sequence});
}

}  // namespace tessera
