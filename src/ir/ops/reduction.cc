// Schemas of the reduction family: Reduce* over axes, ArgMax/ArgMin, TopK,
// and the per-axis normalisations Softmax, LogSoftmax and Hardmax.
//
// Legacy forms are normalised so that kernels see one form: the Reduce* axes
// attribute (every opset before 13 for ReduceSum, up to 17 for the others)
// and TopK's k attribute (before opset 10) become constant int64 inputs.
#include "ir/op_schema.h"
#include "ir/ops/reduction_internal.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

void normalize_reduce(Graph& graph, Node& node) { move_attribute_to_input(graph, node, "axes", 1); }

void infer_reduce(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  const bool keepdims = ctx.attrs().get_int_or("keepdims", 1) != 0;
  const bool noop = ctx.attrs().get_int_or("noop_with_empty_axes", 0) != 0;
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(1)) {
    axes = ctx.input_ints(1);
    // Axes known only at run time: the rank is still known when dims are kept.
    if (!axes) return ctx.set_output_unknown(0, x.dtype, keepdims && x.rank_known ? x.rank() : -1);
  }
  if (!x.rank_known) return ctx.set_output_unknown(0, x.dtype);
  try {
    std::vector<bool> mask = reduction::reduced_axes_mask(x.rank(), axes, noop);
    ctx.set_output(0, x.dtype, reduction::reduced_shape(x.dims, mask, keepdims));
  } catch (const Error& e) {
    ctx.fail(e.what());
  }
}

void infer_arg_reduce(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  const bool keepdims = ctx.attrs().get_int_or("keepdims", 1) != 0;
  if (!x.rank_known) return ctx.set_output_unknown(0, DType::kInt64);
  int64_t axis = ctx.attrs().get_int_or("axis", 0);
  if (axis < -x.rank() || axis >= x.rank()) ctx.fail("axis ", axis, " is out of range for rank ", x.rank());
  if (axis < 0) axis += x.rank();
  std::vector<bool> mask(static_cast<size_t>(x.rank()), false);
  mask[static_cast<size_t>(axis)] = true;
  ctx.set_output(0, DType::kInt64, reduction::reduced_shape(x.dims, mask, keepdims));
}

void normalize_topk(Graph& graph, Node& node) {
  // Before opset 10, k was an attribute.
  if (node.attrs.has("k")) move_attribute_to_input(graph, node, "k", 1);
}

void infer_topk(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  if (!x.rank_known) {
    ctx.set_output_unknown(0, x.dtype);
    if (ctx.num_outputs() > 1) ctx.set_output_unknown(1, DType::kInt64);
    return;
  }
  int64_t axis = ctx.attrs().get_int_or("axis", -1);
  if (axis < -x.rank() || axis >= x.rank()) ctx.fail("axis ", axis, " is out of range for rank ", x.rank());
  if (axis < 0) axis += x.rank();
  if (!ctx.has_input(1)) ctx.fail("k is missing (neither input 'K' nor attribute 'k' given)");
  std::optional<std::vector<int64_t>> k = ctx.input_ints(1);
  if (!k) {
    ctx.set_output_unknown(0, x.dtype, x.rank());
    if (ctx.num_outputs() > 1) ctx.set_output_unknown(1, DType::kInt64, x.rank());
    return;
  }
  if (k->size() != 1) ctx.fail("K must hold exactly one value, got ", k->size());
  const int64_t extent = x.dims[static_cast<size_t>(axis)];
  if ((*k)[0] < 0 || (extent >= 0 && (*k)[0] > extent)) {
    ctx.fail("K = ", (*k)[0], " is out of range for axis ", axis, " of size ", extent);
  }
  Shape dims = x.dims;
  dims[static_cast<size_t>(axis)] = (*k)[0];
  ctx.set_output(0, x.dtype, dims);
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kInt64, dims);
}

void infer_softmax_like(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  if (x.rank_known) {
    // The default axis changed at opset 13 (1 coerced to 2-D before, -1 per-axis after).
    int64_t axis = ctx.attrs().get_int_or("axis", ctx.opset() >= 13 ? -1 : 1);
    const int64_t rank = x.rank();
    // Before opset 13, axis == rank is allowed (the 2-D coercion puts everything in the batch).
    const int64_t upper = ctx.opset() >= 13 ? rank - 1 : rank;
    if (axis < -rank || axis > upper) ctx.fail("axis ", axis, " is out of range for rank ", rank);
  }
  ctx.output(0) = x;
}

std::vector<AttributeSpec> reduce_attributes() {
  return {{"axes", Kind::kInts, std::nullopt},
          {"keepdims", Kind::kInt, Attribute::of_int(1)},
          {"noop_with_empty_axes", Kind::kInt, Attribute::of_int(0)}};
}

}  // namespace

void register_reduction_ops(OpRegistry& registry) {
  // Every Reduce* op accepts an axes input after normalisation (see file comment).
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"}) {
    registry.add({.op_type = op,
                  .min_opset = 1,
                  .min_inputs = 1,
                  .max_inputs = 2,
                  .attributes = reduce_attributes(),
                  .input_dtypes = kNumericTypes,
                  .normalize = normalize_reduce,
                  .infer = infer_reduce});
  }
  for (const char* op : {"ArgMax", "ArgMin"}) {
    registry.add({.op_type = op,
                  .min_opset = 1,
                  .attributes = {{"axis", Kind::kInt, Attribute::of_int(0)},
                                 {"keepdims", Kind::kInt, Attribute::of_int(1)},
                                 {"select_last_index", Kind::kInt, Attribute::of_int(0)}},
                  .input_dtypes = kNumericTypes,
                  .infer = infer_arg_reduce});
  }
  registry.add({.op_type = "TopK",
                .min_opset = 1,
                .min_inputs = 1,
                .max_inputs = 2,
                .min_outputs = 2,
                .max_outputs = 2,
                .attributes = {{"axis", Kind::kInt, Attribute::of_int(-1)},
                               {"k", Kind::kInt, std::nullopt},
                               {"largest", Kind::kInt, Attribute::of_int(1)},
                               {"sorted", Kind::kInt, Attribute::of_int(1)}},
                .input_dtypes = kNumericTypes,
                .normalize = normalize_topk,
                .infer = infer_topk});
  for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"}) {
    // No default for axis: it depends on the opset (see infer_softmax_like).
    registry.add({.op_type = op,
                  .min_opset = 1,
                  .attributes = {{"axis", Kind::kInt, std::nullopt}},
                  .input_dtypes = kFloatTypes,
                  .infer = infer_softmax_like});
  }
}

}  // namespace tessera
