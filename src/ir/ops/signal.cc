// Schemas of the signal family: the detection/segmentation vision ops
// (NonMaxSuppression, RoiAlign, GridSample, MaxUnpool), Det, and the
// spectral and random ops registered from signal_spectral.cc.
//
// Legacy form normalised here: RoiAlign before opset 16 had no
// coordinate_transformation_mode and behaved as "output_half_pixel".
#include "ir/op_schema.h"
#include "ir/ops/signal_internal.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

void infer_non_max_suppression(InferContext& ctx) {
  const TensorType& boxes = ctx.input_type(0);
  const TensorType& scores = ctx.input_type(1);
  if (boxes.rank_known && (boxes.rank() != 3 || (boxes.dims[2] >= 0 && boxes.dims[2] != 4))) {
    ctx.fail("boxes must be [batch, boxes, 4], got ", boxes.to_string());
  }
  if (scores.rank_known && scores.rank() != 3) ctx.fail("scores must be [batch, classes, boxes], got ", scores.to_string());
  // The number of selected boxes depends on the data: the kernel allocates.
  TensorType t;
  t.dtype = DType::kInt64;
  t.rank_known = true;
  t.dims = {-1, 3};
  ctx.output(0) = t;
}

void normalize_roi_align(Graph&, Node& node) {
  if (node.opset < 16) node.attrs.set("coordinate_transformation_mode", Attribute::of_string("output_half_pixel"));
}

void infer_roi_align(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  const TensorType& rois = ctx.input_type(1);
  const std::string mode = ctx.attrs().get_string_or("mode", "avg");
  if (mode != "avg" && mode != "max") ctx.fail("mode '", mode, "' is not one of avg, max");
  const std::string transform = ctx.attrs().get_string_or("coordinate_transformation_mode", "half_pixel");
  if (transform != "half_pixel" && transform != "output_half_pixel") {
    ctx.fail("coordinate_transformation_mode '", transform, "' is not one of half_pixel, output_half_pixel");
  }
  if (x.rank_known && x.rank() != 4) ctx.fail("X must be [N, C, H, W], got ", x.to_string());
  if (rois.rank_known && rois.rank() != 2) ctx.fail("rois must be [num_rois, 4], got ", rois.to_string());
  const int64_t num_rois = rois.rank_known ? rois.dims[0] : -1;
  const int64_t channels = x.rank_known ? x.dims[1] : -1;
  ctx.set_output(0, x.dtype,
                 {num_rois, channels, ctx.attrs().get_int_or("output_height", 1), ctx.attrs().get_int_or("output_width", 1)});
}

void infer_grid_sample(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  const TensorType& grid = ctx.input_type(1);
  const std::string mode = ctx.attrs().get_string_or("mode", "bilinear");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") {
    ctx.fail("mode '", mode, "' is not one of bilinear, nearest, bicubic");
  }
  const std::string padding = ctx.attrs().get_string_or("padding_mode", "zeros");
  if (padding != "zeros" && padding != "border" && padding != "reflection") {
    ctx.fail("padding_mode '", padding, "' is not one of zeros, border, reflection");
  }
  if (x.rank_known && x.rank() != 4) ctx.fail("X must be [N, C, H, W], got ", x.to_string());
  if (grid.rank_known && grid.rank() != 4) ctx.fail("grid must be [N, H_out, W_out, 2], got ", grid.to_string());
  if (!x.rank_known || !grid.rank_known) return ctx.set_output_unknown(0, x.dtype, 4);
  ctx.set_output(0, x.dtype, {x.dims[0], x.dims[1], grid.dims[1], grid.dims[2]});
}

void infer_max_unpool(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  if (!x.rank_known) return ctx.set_output_unknown(0, x.dtype);
  if (x.rank() < 3) ctx.fail("X must have rank >= 3 (N, C, spatial...), got ", x.to_string());
  if (ctx.has_input(2)) {
    std::optional<std::vector<int64_t>> shape = ctx.input_ints(2);
    if (!shape) return ctx.set_output_unknown(0, x.dtype, x.rank());
    if (static_cast<int64_t>(shape->size()) != x.rank()) {
      ctx.fail("output_shape has ", shape->size(), " values for X of rank ", x.rank());
    }
    for (int64_t d : *shape) {
      if (d < 0) ctx.fail("output_shape value ", d, " is negative");
    }
    return ctx.set_output(0, x.dtype, *shape);
  }
  ctx.set_output(0, x.dtype, max_unpool_default_shape(ctx.node(), x.dims));
}

void infer_det(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  if (!x.rank_known) return ctx.set_output_unknown(0, x.dtype);
  if (x.rank() < 2) ctx.fail("input must have rank >= 2 ([..., M, M]), got ", x.to_string());
  const int64_t m = x.dims[x.dims.size() - 2], n = x.dims.back();
  if (m >= 0 && n >= 0 && m != n) ctx.fail("matrices must be square, got ", x.to_string());
  ctx.set_output(0, x.dtype, Shape(x.dims.begin(), x.dims.end() - 2));
}

}  // namespace

Shape max_unpool_default_shape(const Node& node, const Shape& input) {
  const size_t spatial = input.size() - 2;
  const std::vector<int64_t> kernel = node.attrs.get_ints_or("kernel_shape", {});
  if (kernel.size() != spatial) {
    throw_user_error(node.describe(), ": kernel_shape has ", kernel.size(), " values for ", spatial, " spatial dims");
  }
  const std::vector<int64_t> strides = node.attrs.get_ints_or("strides", std::vector<int64_t>(spatial, 1));
  const std::vector<int64_t> pads = node.attrs.get_ints_or("pads", std::vector<int64_t>(2 * spatial, 0));
  if (strides.size() != spatial || pads.size() != 2 * spatial) {
    throw_user_error(node.describe(), ": strides/pads do not match ", spatial, " spatial dims");
  }
  Shape out = {input[0], input[1]};
  for (size_t d = 0; d < spatial; ++d) {
    const int64_t in = input[d + 2];
    // In 128 bits: attributes may be hostile; a size past int64 saturates and the size check rejects it.
    const __int128 size = static_cast<__int128>(in - 1) * strides[d] - pads[d] - pads[d + spatial] + kernel[d];
    if (in >= 0 && size < 0) throw_user_error(node.describe(), ": the output would have a negative size along spatial dim ", d);
    out.push_back(in < 0 ? -1 : size > INT64_MAX ? INT64_MAX : static_cast<int64_t>(size));
  }
  return out;
}

void register_signal_ops(OpRegistry& registry) {
  registry.add({.op_type = "NonMaxSuppression",
                .min_opset = 10,
                .min_inputs = 2,
                .max_inputs = 5,
                .attributes = {{"center_point_box", Kind::kInt, Attribute::of_int(0)}},
                .input_dtypes = {DType::kFloat32, DType::kFloat64},
                .infer = infer_non_max_suppression,
                .data_dependent_output = true});
  registry.add({.op_type = "RoiAlign",
                .min_opset = 10,
                .min_inputs = 3,
                .max_inputs = 3,
                .attributes = {{"coordinate_transformation_mode", Kind::kString, Attribute::of_string("half_pixel")},
                               {"mode", Kind::kString, Attribute::of_string("avg")},
                               {"output_height", Kind::kInt, Attribute::of_int(1)},
                               {"output_width", Kind::kInt, Attribute::of_int(1)},
                               {"sampling_ratio", Kind::kInt, Attribute::of_int(0)},
                               {"spatial_scale", Kind::kFloat, Attribute::of_float(1.0f)}},
                .input_dtypes = kFloatTypes,
                .normalize = normalize_roi_align,
                .infer = infer_roi_align});
  registry.add({.op_type = "GridSample",
                .min_opset = 16,
                .min_inputs = 2,
                .max_inputs = 2,
                .attributes = {{"align_corners", Kind::kInt, Attribute::of_int(0)},
                               {"mode", Kind::kString, Attribute::of_string("bilinear")},
                               {"padding_mode", Kind::kString, Attribute::of_string("zeros")}},
                .input_dtypes = kFloatTypes,
                .infer = infer_grid_sample});
  registry.add({.op_type = "MaxUnpool",
                .min_opset = 9,
                .min_inputs = 2,
                .max_inputs = 3,
                .attributes = {{"kernel_shape", Kind::kInts, std::nullopt, true},
                               {"pads", Kind::kInts, std::nullopt},
                               {"strides", Kind::kInts, std::nullopt}},
                .input_dtypes = kFloatTypes,
                .infer = infer_max_unpool});
  registry.add({.op_type = "Det", .min_opset = 11, .input_dtypes = kFloatTypes, .infer = infer_det});
  register_signal_spectral_ops(registry);
  register_signal_random_ops(registry);
}

}  // namespace tessera
