// Schemas of the quantization ops (ONNX opsets 10..17): QuantizeLinear,
// DequantizeLinear (per-tensor, and per-axis from opset 13),
// DynamicQuantizeLinear, and the integer products MatMulInteger,
// QLinearMatMul, ConvInteger and QLinearConv. Conv geometry comes from
// window_geometry (nn_geometry.cc), so the integer convolutions agree with
// Conv on pads, strides, dilations, groups and auto_pad.
#include <cmath>

#include "ir/op_schema.h"
#include "ir/ops/nn_internal.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

const std::vector<DType> kQuantizeInputTypes = {DType::kFloat32, DType::kInt32};
const std::vector<DType> kDequantizeInputTypes = {DType::kInt8, DType::kUInt8, DType::kInt32};
const std::vector<DType> kEightBitTypes = {DType::kInt8, DType::kUInt8};

bool is_eight_bit(DType dtype) { return dtype == DType::kInt8 || dtype == DType::kUInt8; }

void require_dtype(InferContext& ctx, size_t input, DType expected) {
  if (ctx.has_input(input) && ctx.input_dtype(input) != expected) {
    ctx.fail(ctx.input_label(input), " is ", dtype_name(ctx.input_dtype(input)), ", expected ", dtype_name(expected));
  }
}

void require_eight_bit(InferContext& ctx, size_t input) {
  if (ctx.has_input(input) && !is_eight_bit(ctx.input_dtype(input))) {
    ctx.fail(ctx.input_label(input), " is ", dtype_name(ctx.input_dtype(input)), ", expected int8 or uint8");
  }
}

/// Checks a scale / zero point of a per-tensor or per-axis quantization of
/// `data` (input `data_input`) along `axis`: a scalar (or one element), or,
/// when per-axis quantization is allowed, a 1-D tensor as long as that axis.
void check_quant_param(InferContext& ctx, size_t param, size_t data_input, int64_t axis, bool per_axis_allowed) {
  if (!ctx.has_input(param)) return;
  const TensorType& p = ctx.input_type(param);
  if (!p.rank_known) return;
  if (p.rank() > 1) ctx.fail(ctx.input_label(param), " has shape ", p.to_string(), ", expected a scalar or a 1-D tensor");
  if (p.rank() == 0 || p.dims[0] == 1) return;
  if (!per_axis_allowed) {
    ctx.fail(ctx.input_label(param), " has shape ", p.to_string(), ", expected a scalar (per-axis quantization needs opset 13)");
  }
  const TensorType& x = ctx.input_type(data_input);
  if (!x.rank_known || p.dims[0] < 0) return;
  if (axis < -x.rank() || axis >= x.rank()) {
    ctx.fail("axis ", axis, " is out of range for ", ctx.input_label(data_input), " of rank ", x.rank(), " (per-axis ",
             ctx.input_label(param), ")");
  }
  const int64_t a = axis < 0 ? axis + x.rank() : axis;
  if (x.dims[a] >= 0 && x.dims[a] != p.dims[0]) {
    ctx.fail(ctx.input_label(param), " has ", p.dims[0], " values but axis ", axis, " of ", x.to_string(), " has size ", x.dims[a]);
  }
}

/// A constant scale must be finite and positive: a zero or negative scale has no
/// quantized meaning (QuantizeLinear would divide by it), so it is a bad model, named here.
void check_scale_values(InferContext& ctx, size_t param) {
  if (!ctx.has_input(param)) return;
  const TensorView* value = ctx.input_value(param);
  if (!value || value->dtype != DType::kFloat32) return;
  const float* scale = value->as<float>();
  for (int64_t k = 0; k < value->numel(); ++k) {
    if (!(std::isfinite(scale[k]) && scale[k] > 0.0f)) {
      ctx.fail("the scale, ", ctx.input_label(param), ", must be positive and finite, but holds ", scale[k],
               value->numel() > 1 ? str_cat(" at index ", k) : std::string());
    }
  }
}

// ------------------------------------------------ QuantizeLinear and co ----

void infer_quantize_linear(InferContext& ctx) {
  require_dtype(ctx, 1, DType::kFloat32);
  require_eight_bit(ctx, 2);
  const int64_t axis = ctx.attrs().get_int_or("axis", 1);
  check_quant_param(ctx, 1, 0, axis, ctx.opset() >= 13);
  check_quant_param(ctx, 2, 0, axis, ctx.opset() >= 13);
  check_scale_values(ctx, 1);
  ctx.output(0) = ctx.input_type(0);
  ctx.output(0).dtype = ctx.has_input(2) ? ctx.input_dtype(2) : DType::kUInt8;
}

void infer_dequantize_linear(InferContext& ctx) {
  require_dtype(ctx, 1, DType::kFloat32);
  if (ctx.has_input(2)) require_dtype(ctx, 2, ctx.input_dtype(0));
  const int64_t axis = ctx.attrs().get_int_or("axis", 1);
  check_quant_param(ctx, 1, 0, axis, ctx.opset() >= 13);
  check_quant_param(ctx, 2, 0, axis, ctx.opset() >= 13);
  check_scale_values(ctx, 1);
  ctx.output(0) = ctx.input_type(0);
  ctx.output(0).dtype = DType::kFloat32;
}

void infer_dynamic_quantize_linear(InferContext& ctx) {
  ctx.output(0) = ctx.input_type(0);
  ctx.output(0).dtype = DType::kUInt8;
  ctx.set_output(1, DType::kFloat32, {});
  ctx.set_output(2, DType::kUInt8, {});
}

// ------------------------------------------------------ integer MatMul ----

/// A zero point or scale of a matrix operand: a scalar, or a 1-D tensor with
/// one value per row of A (`per_row`) or per column of B.
void check_matrix_param(InferContext& ctx, size_t param, size_t matrix, bool per_row) {
  if (!ctx.has_input(param)) return;
  const TensorType& p = ctx.input_type(param);
  const TensorType& m = ctx.input_type(matrix);
  if (!p.rank_known || !m.rank_known || m.rank() == 0) return;
  if (p.rank() > 1) ctx.fail(ctx.input_label(param), " has shape ", p.to_string(), ", expected a scalar or a 1-D tensor");
  if (p.rank() == 0 || p.dims[0] == 1 || p.dims[0] < 0) return;
  const int64_t expected = per_row ? (m.rank() >= 2 ? m.dims[m.rank() - 2] : 1) : (m.rank() >= 2 ? m.dims.back() : 1);
  if (expected >= 0 && p.dims[0] != expected) {
    ctx.fail(ctx.input_label(param), " has ", p.dims[0], " values, expected 1 or ", expected, " (one per ",
             per_row ? "row of A " : "column of B ", m.to_string(), ")");
  }
}

void infer_matmul_integer(InferContext& ctx) {
  require_eight_bit(ctx, 1);
  if (ctx.has_input(2)) require_dtype(ctx, 2, ctx.input_dtype(0));
  if (ctx.has_input(3)) require_dtype(ctx, 3, ctx.input_dtype(1));
  check_matrix_param(ctx, 2, 0, true);
  check_matrix_param(ctx, 3, 1, false);
  set_matmul_output(ctx, 0, 1, DType::kInt32);
}

// QLinearMatMul inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
void infer_qlinear_matmul(InferContext& ctx) {
  require_eight_bit(ctx, 3);
  require_dtype(ctx, 1, DType::kFloat32);
  require_dtype(ctx, 4, DType::kFloat32);
  require_dtype(ctx, 6, DType::kFloat32);
  require_dtype(ctx, 2, ctx.input_dtype(0));
  require_dtype(ctx, 5, ctx.input_dtype(3));
  for (size_t p : {1, 4, 6}) check_scale_values(ctx, p);
  require_eight_bit(ctx, 7);
  for (size_t p : {1, 2}) check_matrix_param(ctx, p, 0, true);
  for (size_t p : {4, 5}) check_matrix_param(ctx, p, 3, false);
  for (size_t p : {6, 7}) check_quant_param(ctx, p, 0, 0, false);
  set_matmul_output(ctx, 0, 3, ctx.has_input(7) ? ctx.input_dtype(7) : ctx.input_dtype(0));
}

// -------------------------------------------------------- integer Conv ----

std::vector<AttributeSpec> conv_attributes() {
  return {{"auto_pad", Kind::kString, Attribute::of_string("NOTSET")},
          {"dilations", Kind::kInts, std::nullopt},
          {"group", Kind::kInt, Attribute::of_int(1)},
          {"kernel_shape", Kind::kInts, std::nullopt},
          {"pads", Kind::kInts, std::nullopt},
          {"strides", Kind::kInts, std::nullopt}};
}

/// Output of a convolution of input `x_input` by `w_input` with `dtype`;
/// `w_zero_point` may be a scalar or hold one value per output channel.
void set_conv_output(InferContext& ctx, size_t x_input, size_t w_input, DType dtype) {
  const TensorType& x = ctx.input_type(x_input);
  const TensorType& w = ctx.input_type(w_input);
  if (!x.rank_known || !w.rank_known) return ctx.set_output_unknown(0, dtype, x.rank_known ? x.rank() : -1);
  if (x.rank() < 3) ctx.fail("X must have rank >= 3 (N, C, spatial...), got ", x.to_string());
  if (w.rank() != x.rank()) ctx.fail("W has rank ", w.rank(), " but X has rank ", x.rank());
  const int64_t group = ctx.attrs().get_int_or("group", 1);
  if (group <= 0) ctx.fail("group = ", group, " must be positive");
  if (x.dims[1] >= 0 && w.dims[1] >= 0 && x.dims[1] != w.dims[1] * group) {
    ctx.fail("X has ", x.dims[1], " channels but W ", w.to_string(), " with group ", group, " expects ", w.dims[1] * group);
  }
  if (w.dims[0] >= 0 && w.dims[0] % group != 0) ctx.fail("W has ", w.dims[0], " output channels, not divisible by group ", group);
  std::vector<int64_t> ks = ctx.attrs().get_ints_or("kernel_shape", {});
  if (!ks.empty()) {
    if (static_cast<int64_t>(ks.size()) != w.rank() - 2) ctx.fail("kernel_shape has ", ks.size(), " values, expected ", w.rank() - 2);
    for (size_t d = 0; d < ks.size(); ++d) {
      if (w.dims[d + 2] >= 0 && ks[d] != w.dims[d + 2]) ctx.fail("kernel_shape[", d, "] = ", ks[d], " but W has ", w.dims[d + 2]);
    }
  }
  if (!x.is_static() || !w.is_static()) return ctx.set_output_unknown(0, dtype, x.rank());
  std::vector<int64_t> in(x.dims.begin() + 2, x.dims.end()), k(w.dims.begin() + 2, w.dims.end());
  WindowGeometry g = window_geometry(ctx.node(), in, k, false);
  Shape out = {x.dims[0], w.dims[0]};
  out.insert(out.end(), g.output.begin(), g.output.end());
  ctx.set_output(0, dtype, out);
}

/// A per-tensor or per-output-channel parameter of W (axis 0).
void check_channel_param(InferContext& ctx, size_t param, size_t w_input) { check_quant_param(ctx, param, w_input, 0, true); }

void infer_conv_integer(InferContext& ctx) {
  require_eight_bit(ctx, 1);
  if (ctx.has_input(2)) require_dtype(ctx, 2, ctx.input_dtype(0));
  if (ctx.has_input(3)) require_dtype(ctx, 3, ctx.input_dtype(1));
  check_quant_param(ctx, 2, 0, 1, false);
  check_channel_param(ctx, 3, 1);
  set_conv_output(ctx, 0, 1, DType::kInt32);
}

// QLinearConv inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
void infer_qlinear_conv(InferContext& ctx) {
  require_eight_bit(ctx, 3);
  require_eight_bit(ctx, 7);
  for (size_t p : {1, 4, 6}) require_dtype(ctx, p, DType::kFloat32);
  for (size_t p : {1, 4, 6}) check_scale_values(ctx, p);
  require_dtype(ctx, 2, ctx.input_dtype(0));
  require_dtype(ctx, 5, ctx.input_dtype(3));
  require_dtype(ctx, 8, DType::kInt32);
  for (size_t p : {1, 2, 6, 7}) check_quant_param(ctx, p, 0, 1, false);
  for (size_t p : {4, 5}) check_channel_param(ctx, p, 3);
  if (ctx.has_input(8)) {
    const TensorType& b = ctx.input_type(8);
    const TensorType& w = ctx.input_type(3);
    if (b.is_static() && w.rank_known && w.dims[0] >= 0 && (b.rank() != 1 || b.dims[0] != w.dims[0])) {
      ctx.fail("B has shape ", b.to_string(), ", expected [", w.dims[0], "]");
    }
  }
  set_conv_output(ctx, 0, 3, ctx.has_input(7) ? ctx.input_dtype(7) : ctx.input_dtype(0));
}

}  // namespace

void register_quantization_ops(OpRegistry& registry) {
  registry.add({.op_type = "QuantizeLinear",
                .min_opset = 10,
                .min_inputs = 2,
                .max_inputs = 3,
                .attributes = {{"axis", Kind::kInt, Attribute::of_int(1)}},
                .input_dtypes = kQuantizeInputTypes,
                .infer = infer_quantize_linear});
  registry.add({.op_type = "DequantizeLinear",
                .min_opset = 10,
                .min_inputs = 2,
                .max_inputs = 3,
                .attributes = {{"axis", Kind::kInt, Attribute::of_int(1)}},
                .input_dtypes = kDequantizeInputTypes,
                .infer = infer_dequantize_linear});
  registry.add({.op_type = "DynamicQuantizeLinear",
                .min_opset = 11,
                .min_inputs = 1,
                .max_inputs = 1,
                .min_outputs = 3,
                .max_outputs = 3,
                .input_dtypes = {DType::kFloat32},
                .infer = infer_dynamic_quantize_linear});
  registry.add({.op_type = "MatMulInteger",
                .min_opset = 10,
                .min_inputs = 2,
                .max_inputs = 4,
                .input_dtypes = kEightBitTypes,
                .infer = infer_matmul_integer});
  registry.add({.op_type = "QLinearMatMul",
                .min_opset = 10,
                .min_inputs = 8,
                .max_inputs = 8,
                .input_dtypes = kEightBitTypes,
                .infer = infer_qlinear_matmul});
  registry.add({.op_type = "ConvInteger",
                .min_opset = 10,
                .min_inputs = 2,
                .max_inputs = 4,
                .attributes = conv_attributes(),
                .input_dtypes = kEightBitTypes,
                .infer = infer_conv_integer});
  registry.add({.op_type = "QLinearConv",
                .min_opset = 10,
                .min_inputs = 8,
                .max_inputs = 9,
                .attributes = conv_attributes(),
                .input_dtypes = kEightBitTypes,
                .infer = infer_qlinear_conv});
}

}  // namespace tessera
