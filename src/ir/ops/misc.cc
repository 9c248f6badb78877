// Schemas of the misc family: Resize and the legacy Upsample, Einsum, and the
// losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
//
// Legacy forms normalised here: Resize-10 (X, scales) becomes the opset-11
// form (X, roi, scales, sizes) with asymmetric coordinates and floor
// rounding, the behaviour opset 10 had; Upsample's scales attribute (opset 7)
// becomes an input, as in opset 9.
#include <cmath>

#include "ir/op_schema.h"
#include "ir/ops/misc_internal.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

void normalize_resize(Graph& graph, Node& node) {
  if (node.opset >= 11) return;
  // Opset 10: inputs are (X, scales); there is no roi and no sizes.
  if (node.inputs.size() >= 2) node.inputs = {node.inputs[0], kNoValue, node.inputs[1]};
  node.attrs.set("coordinate_transformation_mode", Attribute::of_string("asymmetric"));
  node.attrs.set("nearest_mode", Attribute::of_string("floor"));
}

void normalize_upsample(Graph& graph, Node& node) {
  node.attrs.set("coordinate_transformation_mode", Attribute::of_string("asymmetric"));
  node.attrs.set("nearest_mode", Attribute::of_string("floor"));
  move_attribute_to_input(graph, node, "scales", 1);
}

/// Output shape of Resize/Upsample: `sizes` when given, else floor(dim * scale).
void infer_resize_with(InferContext& ctx, size_t scales_input, size_t sizes_input) {
  const TensorType& x = ctx.input_type(0);
  if (!x.rank_known) return ctx.set_output_unknown(0, x.dtype);
  const int64_t rank = x.rank();
  const TensorView* sizes = ctx.has_input(sizes_input) ? ctx.input_value(sizes_input) : nullptr;
  const bool sizes_given = ctx.has_input(sizes_input) && (!sizes || sizes->numel() > 0);
  if (sizes_given) {
    if (!sizes) return ctx.set_output_unknown(0, x.dtype, rank);
    if (sizes->numel() != rank) ctx.fail("sizes has ", sizes->numel(), " values for an input of rank ", rank);
    Shape dims(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) {
      dims[static_cast<size_t>(i)] = view_int_at(*sizes, i);
      if (dims[static_cast<size_t>(i)] < 0) ctx.fail("sizes value ", dims[static_cast<size_t>(i)], " for dim ", i, " is negative");
    }
    return ctx.set_output(0, x.dtype, dims);
  }
  if (!ctx.has_input(scales_input)) ctx.fail("one of scales and sizes must be given");
  const TensorView* scales = ctx.input_value(scales_input);
  if (!scales) return ctx.set_output_unknown(0, x.dtype, rank);
  if (scales->numel() != rank) ctx.fail("scales has ", scales->numel(), " values for an input of rank ", rank);
  Shape dims(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) {
    const double scale = view_double_at(*scales, i);
    if (!(scale > 0) || !std::isfinite(scale)) ctx.fail("scale ", scale, " for dim ", i, " must be positive and finite");
    const int64_t in = x.dims[static_cast<size_t>(i)];
    const double size = std::floor(static_cast<double>(in) * scale);
    // A size past int64 saturates (and the size check rejects it) rather than reaching the cast.
    dims[static_cast<size_t>(i)] = in < 0 ? -1 : size < 9.2e18 ? static_cast<int64_t>(size) : INT64_MAX;
  }
  ctx.set_output(0, x.dtype, dims);
}

void infer_resize(InferContext& ctx) { infer_resize_with(ctx, 2, 3); }
void infer_upsample(InferContext& ctx) { infer_resize_with(ctx, 1, 99); }

void infer_einsum(InferContext& ctx) {
  const DType dtype = ctx.input_dtype(0);
  std::vector<int64_t> ranks;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorType& t = ctx.input_type(i);
    if (t.dtype != dtype) ctx.fail("inputs have different dtypes ", dtype_name(dtype), " and ", dtype_name(t.dtype));
    if (!t.rank_known) return ctx.set_output_unknown(0, dtype);
    ranks.push_back(t.rank());
    shapes.push_back(t.dims);
  }
  try {
    const einsum::Equation eq = einsum::parse(ctx.attrs().get_string_or("equation", ""), ranks);
    const std::vector<int64_t> sizes = einsum::label_sizes(eq, shapes);
    Shape dims;
    for (int label : eq.output_labels) dims.push_back(sizes[static_cast<size_t>(label)]);
    ctx.set_output(0, dtype, dims);
  } catch (const Error& e) {
    ctx.fail(e.what());
  }
}

/// Both losses: input [N, C, d1..dk], target [N, d1..dk]; a scalar unless reduction is none.
void infer_loss(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  const TensorType& target = ctx.input_type(1);
  if (target.dtype != DType::kInt32 && target.dtype != DType::kInt64) {
    ctx.fail("target must be int32 or int64, got ", dtype_name(target.dtype));
  }
  const std::string reduction = ctx.attrs().get_string_or("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    ctx.fail("reduction '", reduction, "' is not one of none, sum, mean");
  }
  if (x.rank_known && x.rank() < 2) ctx.fail("input must have rank >= 2, got ", x.rank());
  if (x.rank_known && target.rank_known && target.rank() != x.rank() - 1) {
    ctx.fail("target has rank ", target.rank(), ", expected ", x.rank() - 1);
  }
  if (reduction != "none") {
    ctx.set_output(0, x.dtype, {});
  } else if (target.rank_known) {
    ctx.set_output(0, x.dtype, target.dims);
  } else {
    ctx.set_output_unknown(0, x.dtype);
  }
  if (ctx.num_outputs() > 1) ctx.output(1) = x;
}

std::vector<AttributeSpec> loss_attributes() {
  return {{"reduction", Kind::kString, Attribute::of_string("mean")}, {"ignore_index", Kind::kInt, std::nullopt}};
}

}  // namespace

void register_misc_ops(OpRegistry& registry) {
  registry.add({.op_type = "Resize",
                .min_opset = 10,
                .min_inputs = 1,
                .max_inputs = 4,
                .attributes = {{"mode", Kind::kString, Attribute::of_string("nearest")},
                               {"coordinate_transformation_mode", Kind::kString, Attribute::of_string("half_pixel")},
                               {"nearest_mode", Kind::kString, Attribute::of_string("round_prefer_floor")},
                               {"cubic_coeff_a", Kind::kFloat, Attribute::of_float(-0.75f)},
                               {"exclude_outside", Kind::kInt, Attribute::of_int(0)},
                               {"extrapolation_value", Kind::kFloat, Attribute::of_float(0.0f)}},
                .input_dtypes = kNumericTypes,
                .normalize = normalize_resize,
                .infer = infer_resize});
  registry.add({.op_type = "Upsample",
                .min_opset = 7,
                .min_inputs = 1,
                .max_inputs = 2,
                .attributes = {{"mode", Kind::kString, Attribute::of_string("nearest")},
                               {"scales", Kind::kFloats, std::nullopt}},
                .input_dtypes = kNumericTypes,
                .normalize = normalize_upsample,
                .infer = infer_upsample});
  registry.add({.op_type = "Einsum",
                .min_opset = 12,
                .min_inputs = 1,
                .max_inputs = 1 << 16,
                .attributes = {{"equation", Kind::kString, std::nullopt, true}},
                .input_dtypes = kNumericTypes,
                .infer = infer_einsum});
  registry.add({.op_type = "NegativeLogLikelihoodLoss",
                .min_opset = 12,
                .min_inputs = 2,
                .max_inputs = 3,
                .attributes = loss_attributes(),
                .input_dtypes = kFloatTypes,
                .infer = infer_loss});
  registry.add({.op_type = "SoftmaxCrossEntropyLoss",
                .min_opset = 12,
                .min_inputs = 2,
                .max_inputs = 3,
                .min_outputs = 1,
                .max_outputs = 2,
                .attributes = loss_attributes(),
                .input_dtypes = kFloatTypes,
                .infer = infer_loss});
}

}  // namespace tessera
