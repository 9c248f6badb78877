// Schemas of ops that read or write through index tensors or masks: Gather,
// GatherElements, GatherND, Scatter, ScatterElements, ScatterND, OneHot,
// NonZero, Compress, Unique.
#include <algorithm>

#include "ir/ops/tensor_internal.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

void check_index_dtype(const InferContext& ctx, size_t input) {
  DType d = ctx.input_dtype(input);
  if (d != DType::kInt64 && d != DType::kInt32) {
    ctx.fail("indices have dtype ", dtype_name(d), ", expected int32 or int64");
  }
}

void infer_gather(InferContext& ctx) {
  const TensorType& data = ctx.input_type(0);
  const TensorType& indices = ctx.input_type(1);
  check_index_dtype(ctx, 1);
  if (!data.rank_known || !indices.rank_known) return ctx.set_output_unknown(0, data.dtype);
  if (data.rank() < 1) ctx.fail("data must have rank >= 1");
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.attrs().get_int_or("axis", 0), data.rank()));
  Shape out(data.dims.begin(), data.dims.begin() + static_cast<std::ptrdiff_t>(axis));
  out.insert(out.end(), indices.dims.begin(), indices.dims.end());
  out.insert(out.end(), data.dims.begin() + static_cast<std::ptrdiff_t>(axis) + 1, data.dims.end());
  ctx.set_output(0, data.dtype, out);
}

void infer_gather_elements(InferContext& ctx) {
  const TensorType& data = ctx.input_type(0);
  const TensorType& indices = ctx.input_type(1);
  check_index_dtype(ctx, 1);
  if (data.rank_known && indices.rank_known) {
    if (data.rank() != indices.rank()) ctx.fail("data has rank ", data.rank(), " but indices have rank ", indices.rank());
    normalize_axis(ctx.attrs().get_int_or("axis", 0), data.rank());
  }
  if (!indices.rank_known) return ctx.set_output_unknown(0, data.dtype);
  ctx.set_output(0, data.dtype, indices.dims);
}

void infer_gather_nd(InferContext& ctx) {
  const TensorType& data = ctx.input_type(0);
  const TensorType& indices = ctx.input_type(1);
  if (ctx.input_dtype(1) != DType::kInt64) ctx.fail("indices must be int64, they are ", dtype_name(ctx.input_dtype(1)));
  if (!data.rank_known || !indices.rank_known || indices.rank() < 1 || indices.dims.back() < 0) {
    return ctx.set_output_unknown(0, data.dtype);
  }
  const int64_t b = ctx.attrs().get_int_or("batch_dims", 0);
  const int64_t k = indices.dims.back();
  if (b < 0 || b >= std::min(data.rank(), indices.rank())) ctx.fail("batch_dims ", b, " is out of range");
  if (k < 1 || k > data.rank() - b) ctx.fail("indices' last dim ", k, " must be in [1, ", data.rank() - b, "]");
  Shape out(indices.dims.begin(), indices.dims.end() - 1);
  out.insert(out.end(), data.dims.begin() + b + k, data.dims.end());
  ctx.set_output(0, data.dtype, out);
}

void infer_scatter(InferContext& ctx) {
  const TensorType& data = ctx.input_type(0);
  check_index_dtype(ctx, 1);
  if (ctx.input_dtype(2) != data.dtype) ctx.fail("updates have dtype ", dtype_name(ctx.input_dtype(2)), ", data has ", dtype_name(data.dtype));
  std::string reduction = ctx.attrs().get_string_or("reduction", "none");
  if (reduction != "none" && reduction != "add" && reduction != "mul" && reduction != "max" && reduction != "min") {
    ctx.fail("reduction '", reduction, "' is not none, add, mul, max or min");
  }
  ctx.output(0) = data;
}

void infer_one_hot(InferContext& ctx) {
  const TensorType& indices = ctx.input_type(0);
  const TensorType& values = ctx.input_type(2);
  const TensorView* depth = ctx.input_value(1);
  if (depth && depth->numel() != 1) ctx.fail("depth must hold one value, it has ", depth->numel());
  if (!indices.rank_known) return ctx.set_output_unknown(0, values.dtype);
  const int64_t out_rank = indices.rank() + 1;
  int64_t axis = ctx.attrs().get_int_or("axis", -1);
  if (axis < -out_rank || axis >= out_rank) ctx.fail("axis ", axis, " is out of range for output rank ", out_rank);
  if (axis < 0) axis += out_rank;
  int64_t n = -1;
  if (depth) {
    // A float depth is checked before it is converted: NaN or 1e30 must not reach the cast.
    if (dtype_is_float(depth->dtype)) {
      const double value = view_double_at(*depth, 0);
      if (!(value >= 1 && value < 9.2e18)) ctx.fail("depth ", value, " must be a finite positive count");
      n = static_cast<int64_t>(value);
    } else {
      n = view_int_at(*depth, 0);
    }
    if (n < 1) ctx.fail("depth ", n, " must be positive");
  }
  Shape out = indices.dims;
  out.insert(out.begin() + axis, n);
  ctx.set_output(0, values.dtype, out);
}

void infer_non_zero(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  TensorType t;
  t.dtype = DType::kInt64;
  t.rank_known = true;
  t.dims = {in.rank_known ? in.rank() : -1, -1};
  ctx.output(0) = t;
}

void infer_compress(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  if (ctx.input_dtype(1) != DType::kBool) ctx.fail("condition must be bool");
  const bool has_axis = ctx.attrs().has("axis");
  const int64_t out_rank = has_axis ? (in.rank_known ? in.rank() : -1) : 1;
  auto condition = ctx.input_ints(1);
  if (!condition || !in.rank_known) return ctx.set_output_unknown(0, in.dtype, out_rank);
  Shape out = in.dims;
  int64_t length;
  size_t axis = 0;
  if (has_axis) {
    axis = static_cast<size_t>(normalize_axis(ctx.attrs().get_int("axis"), in.rank()));
    length = in.dims[axis];
  } else {
    out = {shape_numel(in.dims)};
    length = std::all_of(in.dims.begin(), in.dims.end(), [](int64_t d) { return d >= 0; }) ? out[0] : -1;
  }
  if (length < 0) return ctx.set_output_unknown(0, in.dtype, out_rank);
  if (static_cast<int64_t>(condition->size()) > length) {
    ctx.fail("condition has ", condition->size(), " values for ", length, " elements along the axis");
  }
  out[axis] = std::count_if(condition->begin(), condition->end(), [](int64_t c) { return c != 0; });
  ctx.set_output(0, in.dtype, out);
}

void infer_unique(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  const bool has_axis = ctx.attrs().has("axis");
  if (has_axis && in.rank_known) normalize_axis(ctx.attrs().get_int("axis"), in.rank());
  ctx.set_output_unknown(0, in.dtype, has_axis ? (in.rank_known ? in.rank() : -1) : 1);
  for (size_t i = 1; i < ctx.num_outputs(); ++i) ctx.set_output_unknown(i, DType::kInt64, 1);
}

}  // namespace

void register_tensor_index_ops(OpRegistry& registry) {
  registry.add({.op_type = "Gather", .min_opset = 1, .min_inputs = 2, .max_inputs = 2,
                .attributes = {{"axis", Kind::kInt, Attribute::of_int(0)}}, .infer = infer_gather});
  registry.add({.op_type = "GatherElements", .min_opset = 11, .min_inputs = 2, .max_inputs = 2,
                .attributes = {{"axis", Kind::kInt, Attribute::of_int(0)}}, .infer = infer_gather_elements});
  registry.add({.op_type = "GatherND", .min_opset = 11, .min_inputs = 2, .max_inputs = 2,
                .attributes = {{"batch_dims", Kind::kInt, Attribute::of_int(0)}}, .infer = infer_gather_nd});
  const std::vector<AttributeSpec> scatter_attributes = {{"axis", Kind::kInt, Attribute::of_int(0)},
                                                         {"reduction", Kind::kString, Attribute::of_string("none")}};
  registry.add({.op_type = "ScatterElements", .min_opset = 11, .min_inputs = 3, .max_inputs = 3,
                .attributes = scatter_attributes, .infer = infer_scatter});
  // Scatter (opsets 9-10) is ScatterElements under its old name.
  registry.add({.op_type = "Scatter", .min_opset = 9, .min_inputs = 3, .max_inputs = 3,
                .attributes = {{"axis", Kind::kInt, Attribute::of_int(0)}}, .infer = infer_scatter});
  registry.add({.op_type = "ScatterND", .min_opset = 11, .min_inputs = 3, .max_inputs = 3,
                .attributes = {{"reduction", Kind::kString, Attribute::of_string("none")}}, .infer = infer_scatter});
  registry.add({.op_type = "OneHot", .min_opset = 9, .min_inputs = 3, .max_inputs = 3,
                .attributes = {{"axis", Kind::kInt, Attribute::of_int(-1)}}, .infer = infer_one_hot});
  registry.add({.op_type = "NonZero", .min_opset = 9, .infer = infer_non_zero, .data_dependent_output = true});
  registry.add({.op_type = "Compress", .min_opset = 9, .min_inputs = 2, .max_inputs = 2,
                .attributes = {{"axis", Kind::kInt}}, .infer = infer_compress});
  registry.add({.op_type = "Unique", .min_opset = 11, .min_outputs = 1, .max_outputs = 4,
                .attributes = {{"axis", Kind::kInt}, {"sorted", Kind::kInt, Attribute::of_int(1)}},
                .infer = infer_unique, .data_dependent_output = true});
}

}  // namespace tessera
