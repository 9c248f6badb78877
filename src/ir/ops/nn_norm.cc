// Schemas of the normalisation ops: BatchNormalization (inference, and
// training_mode=1 from opset 14), InstanceNormalization, LayerNormalization,
// MeanVarianceNormalization and LRN.
#include "ir/op_schema.h"
#include "ir/ops/nn_internal.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

void require_rank_at_least(InferContext& ctx, const TensorType& x, int64_t rank) {
  if (x.rank_known && x.rank() < rank) ctx.fail("X must have rank >= ", rank, ", got ", x.to_string());
}

/// Checks that input i is a vector of `channels` elements (when both are known).
void check_channel_vector(InferContext& ctx, size_t i, int64_t channels, const char* what) {
  if (!ctx.has_input(i)) return;
  const TensorType& t = ctx.input_type(i);
  if (!t.is_static() || channels < 0) return;
  if (t.rank() != 1 || t.dims[0] != channels) ctx.fail(what, " has shape ", t.to_string(), ", expected [", channels, "]");
}

void infer_batch_norm(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  require_rank_at_least(ctx, x, 2);
  const bool training = ctx.attrs().get_int_or("training_mode", 0) != 0;
  if (ctx.num_outputs() > 1 && !(training && ctx.opset() >= 14)) {
    throw_unsupported(ctx.node().describe(), ": training-mode outputs of BatchNormalization before opset 14 are not supported");
  }
  const int64_t channels = x.rank_known ? x.dims[1] : -1;
  const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
  for (size_t i = 1; i < 5; ++i) {
    if (ctx.has_input(i) && ctx.input_dtype(i) != x.dtype) ctx.fail(names[i], " is ", dtype_name(ctx.input_dtype(i)), " but X is ", dtype_name(x.dtype));
    check_channel_vector(ctx, i, channels, names[i]);
  }
  ctx.output(0) = x;
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, x.dtype, {channels});
}

void infer_instance_norm(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  require_rank_at_least(ctx, x, 3);
  const int64_t channels = x.rank_known ? x.dims[1] : -1;
  check_channel_vector(ctx, 1, channels, "scale");
  check_channel_vector(ctx, 2, channels, "B");
  ctx.output(0) = x;
}

void infer_layer_norm(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  if (ctx.input_dtype(1) != x.dtype) ctx.fail("Scale is ", dtype_name(ctx.input_dtype(1)), " but X is ", dtype_name(x.dtype));
  ctx.output(0) = x;
  if (!x.rank_known) {
    for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output_unknown(i, x.dtype);
    return;
  }
  const int64_t axis = normalize_axis(ctx.attrs().get_int_or("axis", -1), x.rank());
  Shape stats = x.dims;
  for (size_t d = static_cast<size_t>(axis); d < stats.size(); ++d) stats[d] = 1;
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output(i, x.dtype, stats);
}

void infer_same(InferContext& ctx) { ctx.output(0) = ctx.input_type(0); }

void infer_lrn(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  require_rank_at_least(ctx, x, 3);
  if (ctx.attrs().get_int("size") <= 0) ctx.fail("size = ", ctx.attrs().get_int("size"), " must be positive");
  ctx.output(0) = x;
}

}  // namespace

void register_nn_norm_ops(OpRegistry& registry) {
  registry.add({.op_type = "BatchNormalization",
                .min_opset = 7,
                .min_inputs = 5,
                .max_inputs = 5,
                .max_outputs = 5,
                .attributes = {{"epsilon", Kind::kFloat, Attribute::of_float(1e-5f)},
                               {"momentum", Kind::kFloat, Attribute::of_float(0.9f)},
                               {"spatial", Kind::kInt, Attribute::of_int(1)},
                               {"training_mode", Kind::kInt, Attribute::of_int(0)}},
                .input_dtypes = kFloatTypes,
                .infer = infer_batch_norm});
  registry.add({.op_type = "InstanceNormalization",
                .min_opset = 6,
                .min_inputs = 3,
                .max_inputs = 3,
                .attributes = {{"epsilon", Kind::kFloat, Attribute::of_float(1e-5f)}},
                .input_dtypes = kFloatTypes,
                .infer = infer_instance_norm});
  registry.add({.op_type = "LayerNormalization",
                .min_opset = 17,
                .min_inputs = 2,
                .max_inputs = 3,
                .max_outputs = 3,
                .attributes = {{"axis", Kind::kInt, Attribute::of_int(-1)},
                               {"epsilon", Kind::kFloat, Attribute::of_float(1e-5f)},
                               {"stash_type", Kind::kInt, Attribute::of_int(1)}},
                .input_dtypes = kFloatTypes,
                .infer = infer_layer_norm});
  registry.add({.op_type = "MeanVarianceNormalization",
                .min_opset = 9,
                .attributes = {{"axes", Kind::kInts, Attribute::of_ints({0, 2, 3})}},
                .input_dtypes = kFloatTypes,
                .infer = infer_same});
  registry.add({.op_type = "LRN",
                .min_opset = 1,
                .attributes = {{"alpha", Kind::kFloat, Attribute::of_float(1e-4f)},
                               {"beta", Kind::kFloat, Attribute::of_float(0.75f)},
                               {"bias", Kind::kFloat, Attribute::of_float(1.0f)},
                               {"size", Kind::kInt, std::nullopt, true}},
                .input_dtypes = kFloatTypes,
                .infer = infer_lrn});
}

}  // namespace tessera
