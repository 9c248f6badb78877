// Schemas of ops that compute or change shapes without reordering data:
// Constant, ConstantOfShape, Reshape, Flatten, Squeeze, Unsqueeze, Shape,
// Size, Range, Expand, EyeLike.
#include <algorithm>
#include <cmath>

#include "ir/ops/tensor_internal.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

int64_t product_or_unknown(const Shape& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) {
    if (dims[i] < 0) return -1;
    p *= dims[i];
  }
  return p;
}

// --- Constant ---------------------------------------------------------------

/// Turns value_float / value_floats / value_int / value_ints into `value`, so
/// that inference and the kernel read one attribute.
void normalize_constant(Graph&, Node& node) {
  const AttributeMap& a = node.attrs;
  if (a.has("sparse_value")) throw_unsupported(node.describe(), ": sparse_value constants are not supported");
  if (a.has("value_string") || a.has("value_strings")) {
    throw_unsupported(node.describe(), ": string constants are not supported");
  }
  Tensor t;
  if (const Attribute* f = a.find("value_float")) {
    t = Tensor(DType::kFloat32, {});
    t.as<float>()[0] = f->kind == Kind::kInt ? static_cast<float>(f->i) : f->f;
  } else if (const Attribute* fs = a.find("value_floats")) {
    t = Tensor(DType::kFloat32, {static_cast<int64_t>(fs->floats.size())});
    std::copy(fs->floats.begin(), fs->floats.end(), t.as<float>());
  } else if (const Attribute* i = a.find("value_int")) {
    t = Tensor(DType::kInt64, {});
    t.as<int64_t>()[0] = i->i;
  } else if (const Attribute* is = a.find("value_ints")) {
    t = int64_tensor(is->ints);
  } else {
    return;
  }
  for (const char* name : {"value_float", "value_floats", "value_int", "value_ints"}) node.attrs.erase(name);
  node.attrs.set("value", Attribute::of_tensor(std::move(t)));
}

void infer_constant(InferContext& ctx) {
  const Attribute* value = ctx.attrs().find("value");
  if (!value || value->kind != Kind::kTensor || !value->tensor) {
    if (ctx.attrs().has("sparse_value") || ctx.attrs().has("value_string") || ctx.attrs().has("value_strings")) {
      throw_unsupported(ctx.node().describe(), ": sparse and string constants are not supported");
    }
    ctx.fail("has no value attribute (value, value_float, value_floats, value_int or value_ints)");
  }
  ctx.set_output(0, value->tensor->dtype(), value->tensor->shape());
}

DType constant_of_shape_dtype(const InferContext& ctx) {
  const Attribute* value = ctx.attrs().find("value");
  if (!value || !value->tensor) return DType::kFloat32;
  if (value->tensor->numel() != 1) ctx.fail("value must hold exactly one element, it has ", value->tensor->numel());
  return value->tensor->dtype();
}

void infer_constant_of_shape(InferContext& ctx) {
  DType dtype = constant_of_shape_dtype(ctx);
  auto shape = ctx.input_ints(0);
  if (!shape) {
    const TensorType& in = ctx.input_type(0);
    return ctx.set_output_unknown(0, dtype, in.rank_known && in.rank() == 1 ? in.dims[0] : -1);
  }
  for (int64_t d : *shape) {
    if (d < 0) ctx.fail("shape value ", d, " is negative");
  }
  ctx.set_output(0, dtype, *shape);
}

// --- Reshape family ---------------------------------------------------------

void normalize_reshape(Graph& graph, Node& node) { move_attribute_to_input(graph, node, "shape", 1); }

void infer_reshape(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  if (!ctx.has_input(1)) ctx.fail("has no shape input");
  auto target = ctx.input_ints(1);
  if (!target) {
    const TensorType& s = ctx.input_type(1);
    return ctx.set_output_unknown(0, in.dtype, s.rank_known && s.rank() == 1 ? s.dims[0] : -1);
  }
  if (!in.rank_known) {
    // Only dims given explicitly are known.
    TensorType t = TensorType::make(in.dtype, *target);
    for (int64_t& d : t.dims) {
      if (d <= 0) d = -1;
    }
    ctx.output(0) = t;
    return;
  }
  ctx.set_output(0, in.dtype, reshape_output_shape(ctx.node(), in.dims, *target, ctx.attrs().get_int_or("allowzero", 0) != 0));
}

void infer_flatten(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  if (!in.rank_known) return ctx.set_output_unknown(0, in.dtype, 2);
  const int64_t rank = in.rank();
  int64_t axis = ctx.attrs().get_int_or("axis", 1);
  if (axis < -rank || axis > rank) ctx.fail("axis ", axis, " is out of range for rank ", rank);
  if (axis < 0) axis += rank;
  const size_t a = static_cast<size_t>(axis);
  ctx.set_output(0, in.dtype, {product_or_unknown(in.dims, 0, a), product_or_unknown(in.dims, a, in.dims.size())});
}

void normalize_squeeze(Graph& graph, Node& node) { move_attribute_to_input(graph, node, "axes", 1); }

void infer_squeeze(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(1)) {
    axes = ctx.input_ints(1);
    if (!axes) {
      const TensorType& a = ctx.input_type(1);
      bool rank_known = in.rank_known && a.rank_known && a.rank() == 1 && a.dims[0] >= 0;
      return ctx.set_output_unknown(0, in.dtype, rank_known ? in.rank() - a.dims[0] : -1);
    }
  }
  if (!in.rank_known) return ctx.set_output_unknown(0, in.dtype);
  const int64_t rank = in.rank();
  std::vector<bool> drop(in.dims.size(), false);
  if (axes) {
    for (int64_t axis : *axes) {
      if (axis < -rank || axis >= rank) ctx.fail("axis ", axis, " is out of range for rank ", rank);
      size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
      if (in.dims[a] > 1 || in.dims[a] == 0) ctx.fail("cannot squeeze axis ", axis, " of size ", in.dims[a]);
      drop[a] = true;
    }
  } else {
    for (size_t i = 0; i < in.dims.size(); ++i) {
      if (in.dims[i] < 0) return ctx.set_output_unknown(0, in.dtype);  // might be 1
      drop[i] = in.dims[i] == 1;
    }
  }
  Shape out;
  for (size_t i = 0; i < in.dims.size(); ++i) {
    if (!drop[i]) out.push_back(in.dims[i]);
  }
  ctx.set_output(0, in.dtype, out);
}

void normalize_unsqueeze(Graph& graph, Node& node) { move_attribute_to_input(graph, node, "axes", 1); }

void infer_unsqueeze(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  if (!ctx.has_input(1)) ctx.fail("has no axes");
  auto axes = ctx.input_ints(1);
  if (!axes || !in.rank_known) {
    const TensorType& a = ctx.input_type(1);
    bool rank_known = in.rank_known && a.rank_known && a.rank() == 1 && a.dims[0] >= 0;
    return ctx.set_output_unknown(0, in.dtype, rank_known ? in.rank() + a.dims[0] : -1);
  }
  const int64_t out_rank = in.rank() + static_cast<int64_t>(axes->size());
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int64_t axis : *axes) {
    if (axis < -out_rank || axis >= out_rank) ctx.fail("axis ", axis, " is out of range for output rank ", out_rank);
    size_t a = static_cast<size_t>(axis < 0 ? axis + out_rank : axis);
    if (inserted[a]) ctx.fail("axis ", axis, " appears twice");
    inserted[a] = true;
  }
  Shape out;
  size_t next = 0;
  for (size_t i = 0; i < inserted.size(); ++i) out.push_back(inserted[i] ? 1 : in.dims[next++]);
  ctx.set_output(0, in.dtype, out);
}

// --- Shape, Size --------------------------------------------------------------

/// Shape's [start, end) over the input dims, clamped as opset 15 specifies.
std::pair<int64_t, int64_t> shape_range(const AttributeMap& attrs, int64_t rank) {
  auto clamp_axis = [rank](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + rank : v, 0, rank); };
  int64_t start = clamp_axis(attrs.get_int_or("start", 0));
  int64_t end = attrs.has("end") ? clamp_axis(attrs.get_int("end")) : rank;
  return {start, std::max(start, end)};
}

void infer_shape(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  if (!in.rank_known) return ctx.set_output_unknown(0, DType::kInt64, 1);
  auto [start, end] = shape_range(ctx.attrs(), in.rank());
  ctx.set_output(0, DType::kInt64, {end - start});
}

void infer_size(InferContext& ctx) {
  ctx.input_type(0);
  ctx.set_output(0, DType::kInt64, {});
}

// --- Range, Expand, EyeLike -------------------------------------------------

/// Range's element count, exactly: max(ceil((limit - start) / delta), 0).
/// Integers are computed in 128 bits, so Range(-2^63, 2^63-1, 2^62) has 4
/// values; a count past INT64_MAX saturates there (and the size check then
/// rejects it). Non-finite float bounds are a user error.
int64_t range_count(const InferContext& ctx, DType dtype, const TensorView& start, const TensorView& limit,
                    const TensorView& delta) {
  if (dtype_is_float(dtype)) {
    const double s = view_double_at(start, 0), l = view_double_at(limit, 0), d = view_double_at(delta, 0);
    const char* names[] = {"start", "limit", "delta"};
    const double values[] = {s, l, d};
    for (int i = 0; i < 3; ++i) {
      if (!std::isfinite(values[i])) ctx.fail(names[i], " is ", values[i], "; start, limit and delta must be finite");
    }
    if (d == 0) ctx.fail("delta is 0");
    const double count = std::ceil((l - s) / d);  // l - s may overflow to inf: then the count is too large
    if (!(count > 0)) return 0;
    if (!(count < 9.2e18)) return INT64_MAX;
    return static_cast<int64_t>(count);
  }
  const int64_t s = view_int_at(start, 0), l = view_int_at(limit, 0), d = view_int_at(delta, 0);
  if (d == 0) ctx.fail("delta is 0");
  const __int128 diff = static_cast<__int128>(l) - s;
  if (diff == 0 || (diff > 0) != (d > 0)) return 0;
  const __int128 magnitude = diff < 0 ? -diff : diff;
  const __int128 step = d < 0 ? -static_cast<__int128>(d) : d;
  const __int128 count = (magnitude + step - 1) / step;
  return count > INT64_MAX ? INT64_MAX : static_cast<int64_t>(count);
}

void infer_range(InferContext& ctx) {
  DType dtype = ctx.input_dtype(0);
  for (size_t i = 1; i < 3; ++i) {
    if (ctx.input_dtype(i) != dtype) ctx.fail("start, limit and delta must have one dtype");
  }
  const TensorView* start = ctx.input_value(0);
  const TensorView* limit = ctx.input_value(1);
  const TensorView* delta = ctx.input_value(2);
  if (!start || !limit || !delta) return ctx.set_output_unknown(0, dtype, 1);
  for (const TensorView* v : {start, limit, delta}) {
    if (v->numel() != 1) ctx.fail("start, limit and delta must be scalars");
  }
  ctx.set_output(0, dtype, {range_count(ctx, dtype, *start, *limit, *delta)});
}

void infer_expand(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  auto shape = ctx.input_ints(1);
  if (!shape || !in.rank_known) {
    const TensorType& s = ctx.input_type(1);
    bool rank_known = in.rank_known && s.rank_known && s.rank() == 1 && s.dims[0] >= 0;
    return ctx.set_output_unknown(0, in.dtype, rank_known ? std::max(in.rank(), s.dims[0]) : -1);
  }
  for (int64_t d : *shape) {
    if (d < 0) ctx.fail("shape value ", d, " is negative");
  }
  try {
    ctx.set_output(0, in.dtype, broadcast_shapes(in.dims, *shape));
  } catch (const Error& e) {
    ctx.fail(e.what());
  }
}

void infer_eye_like(InferContext& ctx) {
  const TensorType& in = ctx.input_type(0);
  DType dtype = ctx.attrs().has("dtype") ? dtype_from_onnx_attribute(ctx.node(), "dtype", ctx.attrs().get_int("dtype")) : in.dtype;
  if (in.rank_known && in.rank() != 2) ctx.fail("input must be 2-D, it has rank ", in.rank());
  if (!in.rank_known) return ctx.set_output_unknown(0, dtype, 2);
  ctx.set_output(0, dtype, in.dims);
}

}  // namespace

void register_tensor_shape_ops(OpRegistry& registry) {
  registry.add({.op_type = "Constant", .min_opset = 1, .min_inputs = 0, .max_inputs = 0,
                .attributes = {{"value", Kind::kTensor}, {"value_float", Kind::kFloat}, {"value_floats", Kind::kFloats},
                               {"value_int", Kind::kInt}, {"value_ints", Kind::kInts}},
                .normalize = normalize_constant, .infer = infer_constant});
  registry.add({.op_type = "ConstantOfShape", .min_opset = 9, .attributes = {{"value", Kind::kTensor}},
                .input_dtypes = {DType::kInt64}, .infer = infer_constant_of_shape});
  registry.add({.op_type = "Reshape", .min_opset = 1, .min_inputs = 1, .max_inputs = 2,
                .attributes = {{"shape", Kind::kInts}, {"allowzero", Kind::kInt, Attribute::of_int(0)}},
                .normalize = normalize_reshape, .infer = infer_reshape});
  registry.add({.op_type = "Flatten", .min_opset = 1, .attributes = {{"axis", Kind::kInt, Attribute::of_int(1)}},
                .infer = infer_flatten});
  registry.add({.op_type = "Squeeze", .min_opset = 1, .min_inputs = 1, .max_inputs = 2,
                .attributes = {{"axes", Kind::kInts}}, .normalize = normalize_squeeze, .infer = infer_squeeze});
  registry.add({.op_type = "Unsqueeze", .min_opset = 1, .min_inputs = 1, .max_inputs = 2,
                .attributes = {{"axes", Kind::kInts}}, .normalize = normalize_unsqueeze, .infer = infer_unsqueeze});
  registry.add({.op_type = "Shape", .min_opset = 1,
                .attributes = {{"start", Kind::kInt, Attribute::of_int(0)}, {"end", Kind::kInt}}, .infer = infer_shape,
                .reads_shapes_only = true});
  registry.add({.op_type = "Size", .min_opset = 1, .infer = infer_size, .reads_shapes_only = true});
  registry.add({.op_type = "Range", .min_opset = 11, .min_inputs = 3, .max_inputs = 3,
                .input_dtypes = {DType::kFloat32, DType::kFloat64, DType::kInt16, DType::kInt32, DType::kInt64},
                .infer = infer_range});
  registry.add({.op_type = "Expand", .min_opset = 8, .min_inputs = 2, .max_inputs = 2, .infer = infer_expand});
  registry.add({.op_type = "EyeLike", .min_opset = 9,
                .attributes = {{"dtype", Kind::kInt}, {"k", Kind::kInt, Attribute::of_int(0)}}, .infer = infer_eye_like});
}

/// Shape's clamped [start, end), for the kernel.
std::pair<int64_t, int64_t> shape_op_range(const AttributeMap& attrs, int64_t rank) { return shape_range(attrs, rank); }

}  // namespace tessera
