// Schemas of Conv and ConvTranspose (1-D, 2-D, 3-D; groups; auto_pad).
// Pads and output sizes come from window_geometry (nn_geometry.cc).
#include "ir/op_schema.h"
#include "ir/ops/nn_internal.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

std::vector<AttributeSpec> conv_attributes(bool transpose) {
  std::vector<AttributeSpec> a = {{"auto_pad", Kind::kString, Attribute::of_string("NOTSET")},
                                  {"dilations", Kind::kInts, std::nullopt},
                                  {"group", Kind::kInt, Attribute::of_int(1)},
                                  {"kernel_shape", Kind::kInts, std::nullopt},
                                  {"pads", Kind::kInts, std::nullopt},
                                  {"strides", Kind::kInts, std::nullopt}};
  if (transpose) {
    a.push_back({"output_padding", Kind::kInts, std::nullopt});
    a.push_back({"output_shape", Kind::kInts, std::nullopt});
  }
  return a;
}

/// Checks ranks, dtypes, group and bias; returns false when shapes are not all known.
bool check_conv_inputs(InferContext& ctx, bool transpose) {
  const TensorType& x = ctx.input_type(0);
  const TensorType& w = ctx.input_type(1);
  if (x.dtype != w.dtype) ctx.fail("X is ", dtype_name(x.dtype), " but W is ", dtype_name(w.dtype));
  if (ctx.has_input(2) && ctx.input_dtype(2) != x.dtype) ctx.fail("B is ", dtype_name(ctx.input_dtype(2)), " but X is ", dtype_name(x.dtype));
  if (!x.rank_known || !w.rank_known) return false;
  if (x.rank() < 3) ctx.fail("X must have rank >= 3 (N, C, spatial...), got ", x.to_string());
  if (w.rank() != x.rank()) ctx.fail("W has rank ", w.rank(), " but X has rank ", x.rank());
  const int64_t group = ctx.attrs().get_int_or("group", 1);
  if (group <= 0) ctx.fail("group = ", group, " must be positive");
  const int64_t channels = x.dims[1];
  const int64_t w_in = transpose ? w.dims[0] : w.dims[1] * group;
  if (channels >= 0 && w.dims[transpose ? 0 : 1] >= 0 && channels != w_in) {
    ctx.fail("X has ", channels, " channels but W ", w.to_string(), " with group ", group, " expects ", w_in);
  }
  if (!transpose && w.dims[0] >= 0 && w.dims[0] % group != 0) {
    ctx.fail("W has ", w.dims[0], " output channels, not divisible by group ", group);
  }
  std::vector<int64_t> ks = ctx.attrs().get_ints_or("kernel_shape", {});
  if (!ks.empty()) {
    if (static_cast<int64_t>(ks.size()) != w.rank() - 2) ctx.fail("kernel_shape has ", ks.size(), " values, expected ", w.rank() - 2);
    for (size_t d = 0; d < ks.size(); ++d) {
      if (w.dims[d + 2] >= 0 && ks[d] != w.dims[d + 2]) ctx.fail("kernel_shape[", d, "] = ", ks[d], " but W has ", w.dims[d + 2]);
    }
  }
  return x.is_static() && w.is_static();
}

void infer_conv(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  const TensorType& w = ctx.input_type(1);
  if (!check_conv_inputs(ctx, false)) return ctx.set_output_unknown(0, x.dtype, x.rank_known ? x.rank() : -1);
  const int64_t out_channels = w.dims[0];
  if (ctx.has_input(2)) {
    const TensorType& b = ctx.input_type(2);
    if (b.is_static() && (b.rank() != 1 || b.dims[0] != out_channels)) ctx.fail("B has shape ", b.to_string(), ", expected [", out_channels, "]");
  }
  std::vector<int64_t> in(x.dims.begin() + 2, x.dims.end()), k(w.dims.begin() + 2, w.dims.end());
  WindowGeometry g = window_geometry(ctx.node(), in, k, false);
  Shape out = {x.dims[0], out_channels};
  out.insert(out.end(), g.output.begin(), g.output.end());
  ctx.set_output(0, x.dtype, out);
}

void infer_conv_transpose(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  const TensorType& w = ctx.input_type(1);
  if (!check_conv_inputs(ctx, true)) return ctx.set_output_unknown(0, x.dtype, x.rank_known ? x.rank() : -1);
  const int64_t out_channels = w.dims[1] * ctx.attrs().get_int_or("group", 1);
  if (ctx.has_input(2)) {
    const TensorType& b = ctx.input_type(2);
    if (b.is_static() && (b.rank() != 1 || b.dims[0] != out_channels)) ctx.fail("B has shape ", b.to_string(), ", expected [", out_channels, "]");
  }
  std::vector<int64_t> in(x.dims.begin() + 2, x.dims.end()), k(w.dims.begin() + 2, w.dims.end());
  WindowGeometry g = conv_transpose_geometry(ctx.node(), in, k);
  Shape out = {x.dims[0], out_channels};
  out.insert(out.end(), g.output.begin(), g.output.end());
  ctx.set_output(0, x.dtype, out);
}

}  // namespace

void register_nn_conv_ops(OpRegistry& registry) {
  // Conv also carries `tessera_clamp` ([low, high], floats) when the
  // native backend has fused a following Relu or Clip into it (pattern ConvActivation).
  std::vector<AttributeSpec> conv_attrs = conv_attributes(false);
  conv_attrs.push_back({"tessera_clamp", Attribute::Kind::kFloats});
  registry.add({.op_type = "Conv",
                .min_opset = 1,
                .min_inputs = 2,
                .max_inputs = 3,
                .attributes = conv_attrs,
                .input_dtypes = kFloatTypes,
                .infer = infer_conv,
                .bf16_compute = true});
  registry.add({.op_type = "ConvTranspose",
                .min_opset = 1,
                .min_inputs = 2,
                .max_inputs = 3,
                .attributes = conv_attributes(true),
                .input_dtypes = kFloatTypes,
                .infer = infer_conv_transpose});
}

}  // namespace tessera
