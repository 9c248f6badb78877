// Schemas of the spectral ops (HannWindow, HammingWindow, BlackmanWindow, DFT,
// STFT, MelWeightMatrix; all opset 17) and of the random generators
// (RandomUniform, RandomNormal, their *Like forms, Bernoulli), which are
// marked non-deterministic so they are never constant-folded.
#include "ir/op_schema.h"
#include "ir/ops/signal_internal.h"
#include "ir/ops/tensor_internal.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

/// A scalar integer input's value when known.
std::optional<int64_t> scalar_int(InferContext& ctx, size_t i) {
  std::optional<std::vector<int64_t>> v = ctx.input_ints(i);
  if (!v) return std::nullopt;
  if (v->size() != 1) ctx.fail(ctx.input_label(i), " must be a scalar, it has ", v->size(), " values");
  return (*v)[0];
}

DType output_datatype(InferContext& ctx, const char* name, int64_t fallback) {
  DType dtype = dtype_from_onnx_attribute(ctx.node(), name, ctx.attrs().get_int_or(name, fallback));
  if (!dtype_is_float(dtype) && !dtype_is_integer(dtype)) {
    ctx.fail(name, " ", dtype_name(dtype), " is not a numeric type");
  }
  return dtype;
}

void infer_window(InferContext& ctx) {
  const DType dtype = output_datatype(ctx, "output_datatype", 1);
  std::optional<int64_t> size = scalar_int(ctx, 0);
  if (!size) return ctx.set_output_unknown(0, dtype, 1);
  if (*size < 0) ctx.fail("size ", *size, " must be >= 0");
  ctx.set_output(0, dtype, {*size});
}

/// DFT-17: input [batch, signal dims..., 1 or 2]; the transformed axis gets
/// dft_length (or its own length) points, halved + 1 when onesided.
void infer_dft(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  if (!x.rank_known) return ctx.set_output_unknown(0, x.dtype);
  const int64_t rank = x.rank();
  if (rank < 3) ctx.fail("input must have rank >= 3 ([batch, signal..., 1 or 2]), got ", x.to_string());
  if (x.dims.back() >= 0 && x.dims.back() != 1 && x.dims.back() != 2) {
    ctx.fail("the last dim must be 1 (real) or 2 (complex), got ", x.to_string());
  }
  int64_t axis = ctx.attrs().get_int_or("axis", 1);
  if (axis < 0) axis += rank - 1;
  if (axis < 1 || axis >= rank - 1) ctx.fail("axis ", ctx.attrs().get_int_or("axis", 1), " is not a signal axis of ", x.to_string());
  const bool onesided = ctx.attrs().get_int_or("onesided", 0) != 0;
  if (onesided && ctx.attrs().get_int_or("inverse", 0) != 0) throw_unsupported(ctx.node().describe(), ": onesided inverse DFT is not supported");
  Shape dims = x.dims;
  int64_t length = dims[static_cast<size_t>(axis)];
  if (ctx.has_input(1)) {
    std::optional<int64_t> given = scalar_int(ctx, 1);
    if (!given) {
      length = -1;
    } else {
      if (*given < 1) ctx.fail("dft_length ", *given, " must be >= 1");
      length = *given;
    }
  }
  dims[static_cast<size_t>(axis)] = length < 0 ? -1 : (onesided ? length / 2 + 1 : length);
  dims.back() = 2;
  ctx.set_output(0, x.dtype, dims);
}

/// STFT-17: signal [batch, length, 1 or 2] -> [batch, frames, bins, 2].
void infer_stft(InferContext& ctx) {
  const TensorType& signal = ctx.input_type(0);
  if (signal.rank_known && signal.rank() != 3) ctx.fail("signal must be [batch, length, 1 or 2], got ", signal.to_string());
  std::optional<int64_t> step = scalar_int(ctx, 1);
  std::optional<int64_t> frame_length;
  if (ctx.has_input(3)) {
    frame_length = scalar_int(ctx, 3);
  } else if (ctx.has_input(2)) {
    const TensorType& window = ctx.input_type(2);
    if (window.rank_known && window.rank() == 1 && window.dims[0] >= 0) frame_length = window.dims[0];
  } else {
    ctx.fail("one of window and frame_length must be given");
  }
  if (!signal.rank_known || !step || !frame_length || signal.dims[1] < 0) {
    return ctx.set_output_unknown(0, signal.dtype, 4);
  }
  if (*step < 1) ctx.fail("frame_step ", *step, " must be >= 1");
  if (*frame_length < 1 || *frame_length > signal.dims[1]) {
    ctx.fail("frame_length ", *frame_length, " must be in [1, signal length ", signal.dims[1], "]");
  }
  const bool onesided = ctx.attrs().get_int_or("onesided", 1) != 0;
  const int64_t frames = (signal.dims[1] - *frame_length) / *step + 1;
  ctx.set_output(0, signal.dtype, {signal.dims[0], frames, onesided ? *frame_length / 2 + 1 : *frame_length, 2});
}

void infer_mel_weight_matrix(InferContext& ctx) {
  const DType dtype = output_datatype(ctx, "output_datatype", 1);
  std::optional<int64_t> bins = scalar_int(ctx, 0);
  std::optional<int64_t> dft_length = scalar_int(ctx, 1);
  if (!bins || !dft_length) return ctx.set_output_unknown(0, dtype, 2);
  if (*bins < 1 || *dft_length < 1) ctx.fail("num_mel_bins ", *bins, " and dft_length ", *dft_length, " must be >= 1");
  ctx.set_output(0, dtype, {*dft_length / 2 + 1, *bins});
}

void infer_random(InferContext& ctx) {
  const DType dtype = output_datatype(ctx, "dtype", 1);
  if (!dtype_is_float(dtype)) ctx.fail("dtype ", dtype_name(dtype), " is not a floating type");
  const std::vector<int64_t> shape = ctx.attrs().get_ints_or("shape", {});
  for (int64_t d : shape) {
    if (d < 0) ctx.fail("shape value ", d, " is negative");
  }
  ctx.set_output(0, dtype, shape);
}

void infer_random_like(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  DType dtype = x.dtype;
  if (ctx.attrs().has("dtype")) dtype = output_datatype(ctx, "dtype", 1);
  if (!dtype_is_float(dtype)) ctx.fail("output dtype ", dtype_name(dtype), " is not a floating type");
  TensorType t = x;
  t.dtype = dtype;
  ctx.output(0) = t;
}

void infer_bernoulli(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  TensorType t = x;
  if (ctx.attrs().has("dtype")) t.dtype = output_datatype(ctx, "dtype", 1);
  ctx.output(0) = t;
}

std::vector<AttributeSpec> window_attributes() {
  return {{"output_datatype", Kind::kInt, Attribute::of_int(1)}, {"periodic", Kind::kInt, Attribute::of_int(1)}};
}

}  // namespace

void register_signal_spectral_ops(OpRegistry& registry) {
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"}) {
    registry.add({.op_type = op, .min_opset = 17, .attributes = window_attributes(), .input_dtypes = {DType::kInt32, DType::kInt64},
                  .infer = infer_window});
  }
  registry.add({.op_type = "DFT",
                .min_opset = 17,
                .min_inputs = 1,
                .max_inputs = 2,
                .attributes = {{"axis", Kind::kInt, Attribute::of_int(1)},
                               {"inverse", Kind::kInt, Attribute::of_int(0)},
                               {"onesided", Kind::kInt, Attribute::of_int(0)}},
                .input_dtypes = kFloatTypes,
                .infer = infer_dft});
  registry.add({.op_type = "STFT",
                .min_opset = 17,
                .min_inputs = 2,
                .max_inputs = 4,
                .attributes = {{"onesided", Kind::kInt, Attribute::of_int(1)}},
                .input_dtypes = kFloatTypes,
                .infer = infer_stft});
  registry.add({.op_type = "MelWeightMatrix",
                .min_opset = 17,
                .min_inputs = 5,
                .max_inputs = 5,
                .attributes = {{"output_datatype", Kind::kInt, Attribute::of_int(1)}},
                .input_dtypes = {DType::kInt32, DType::kInt64},
                .infer = infer_mel_weight_matrix});
}

void register_signal_random_ops(OpRegistry& registry) {
  registry.add({.op_type = "RandomUniform",
                .min_opset = 1,
                .min_inputs = 0,
                .max_inputs = 0,
                .attributes = {{"dtype", Kind::kInt, Attribute::of_int(1)},
                               {"high", Kind::kFloat, Attribute::of_float(1.0f)},
                               {"low", Kind::kFloat, Attribute::of_float(0.0f)},
                               {"seed", Kind::kFloat, std::nullopt},
                               {"shape", Kind::kInts, std::nullopt, true}},
                .infer = infer_random,
                .deterministic = false});
  registry.add({.op_type = "RandomNormal",
                .min_opset = 1,
                .min_inputs = 0,
                .max_inputs = 0,
                .attributes = {{"dtype", Kind::kInt, Attribute::of_int(1)},
                               {"mean", Kind::kFloat, Attribute::of_float(0.0f)},
                               {"scale", Kind::kFloat, Attribute::of_float(1.0f)},
                               {"seed", Kind::kFloat, std::nullopt},
                               {"shape", Kind::kInts, std::nullopt, true}},
                .infer = infer_random,
                .deterministic = false});
  registry.add({.op_type = "RandomUniformLike",
                .min_opset = 1,
                .attributes = {{"dtype", Kind::kInt, std::nullopt},
                               {"high", Kind::kFloat, Attribute::of_float(1.0f)},
                               {"low", Kind::kFloat, Attribute::of_float(0.0f)},
                               {"seed", Kind::kFloat, std::nullopt}},
                .infer = infer_random_like,
                .deterministic = false});
  registry.add({.op_type = "RandomNormalLike",
                .min_opset = 1,
                .attributes = {{"dtype", Kind::kInt, std::nullopt},
                               {"mean", Kind::kFloat, Attribute::of_float(0.0f)},
                               {"scale", Kind::kFloat, Attribute::of_float(1.0f)},
                               {"seed", Kind::kFloat, std::nullopt}},
                .infer = infer_random_like,
                .deterministic = false});
  registry.add({.op_type = "Bernoulli",
                .min_opset = 15,
                .attributes = {{"dtype", Kind::kInt, std::nullopt}, {"seed", Kind::kFloat, std::nullopt}},
                .input_dtypes = kFloatTypes,
                .infer = infer_bernoulli,
                .deterministic = false});
}

}  // namespace tessera
