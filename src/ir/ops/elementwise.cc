// Schemas of element-wise ops: unary math, activations, broadcast binary
// arithmetic, comparisons and logic, variadic Max/Min/Sum/Mean, Where, Cast,
// CastLike, Identity and Dropout (inference only).
#include <limits>

#include "ir/op_schema.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

const std::vector<DType> kFloats = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16};
const std::vector<DType> kSignedNumbers = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                           DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64};
const std::vector<DType> kNumbers = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                     DType::kInt8,    DType::kInt16,   DType::kInt32,   DType::kInt64,
                                     DType::kUInt8,   DType::kUInt16,  DType::kUInt32,  DType::kUInt64};
const std::vector<DType> kNumbersAndBool = [] {
  std::vector<DType> v = kNumbers;
  v.push_back(DType::kBool);
  return v;
}();
const std::vector<DType> kNumbersBoolAndString = [] {
  std::vector<DType> v = kNumbersAndBool;
  v.push_back(DType::kString);
  return v;
}();
const std::vector<DType> kUnsigned = {DType::kUInt8, DType::kUInt16, DType::kUInt32, DType::kUInt64};
const std::vector<DType> kBool = {DType::kBool};

AttributeSpec float_attr(const char* name, float value) { return {name, Kind::kFloat, Attribute::of_float(value)}; }
AttributeSpec int_attr(const char* name, int64_t value) { return {name, Kind::kInt, Attribute::of_int(value)}; }

/// Output 0 has input 0's shape with another dtype.
void set_like_input0(InferContext& ctx, size_t output, DType dtype) {
  ctx.output(output) = ctx.input_type(0);
  ctx.output(output).dtype = dtype;
}

void infer_same_as_input0(InferContext& ctx) { set_like_input0(ctx, 0, ctx.input_dtype(0)); }
void infer_bool_like_input0(InferContext& ctx) { set_like_input0(ctx, 0, DType::kBool); }

/// One dim of a numpy broadcast where -1 is unknown: a known dim other than
/// 1 decides, since the unknown one must be 1 or equal to it. -2: incompatible.
int64_t broadcast_dim(int64_t a, int64_t b) {
  if (a == b || b == 1) return a;
  if (a == 1) return b;
  if (a < 0) return b;
  if (b < 0) return a;
  return -2;
}

/// Output `output` is the broadcast of the inputs in [first, end) with `dtype`.
void set_broadcast(InferContext& ctx, size_t first, size_t end, DType dtype) {
  Shape dims;
  for (size_t i = first; i < end; ++i) {
    const TensorType& t = ctx.input_type(i);
    if (!t.rank_known) return ctx.set_output_unknown(0, dtype);
    if (t.dims.size() > dims.size()) dims.insert(dims.begin(), t.dims.size() - dims.size(), 1);
    const size_t pad = dims.size() - t.dims.size();
    for (size_t d = 0; d < t.dims.size(); ++d) {
      dims[pad + d] = broadcast_dim(dims[pad + d], t.dims[d]);
      if (dims[pad + d] == -2) {
        std::string shapes;
        for (size_t k = first; k <= i; ++k) {
          shapes += (k == first ? "" : ", ") + ctx.input_label(k) + " " + ctx.input_type(k).to_string();
        }
        ctx.fail("input shapes cannot be broadcast together: ", shapes);
      }
    }
  }
  ctx.set_output(0, dtype, std::move(dims));
}

void require_same_dtypes(InferContext& ctx, size_t first, size_t end) {
  for (size_t i = first + 1; i < end; ++i) {
    if (ctx.input_dtype(i) != ctx.input_dtype(first)) {
      ctx.fail("input ", i, " has dtype ", dtype_name(ctx.input_dtype(i)), ", input ", first, " has ",
               dtype_name(ctx.input_dtype(first)));
    }
  }
}

void infer_broadcast(InferContext& ctx) {
  require_same_dtypes(ctx, 0, ctx.num_inputs());
  set_broadcast(ctx, 0, ctx.num_inputs(), ctx.input_dtype(0));
}

void infer_compare(InferContext& ctx) {
  require_same_dtypes(ctx, 0, 2);
  set_broadcast(ctx, 0, 2, DType::kBool);
}

void infer_logic(InferContext& ctx) {
  for (size_t i = 0; i < 2; ++i) {
    if (ctx.input_dtype(i) != DType::kBool) ctx.fail("input ", i, " must be bool, is ", dtype_name(ctx.input_dtype(i)));
  }
  set_broadcast(ctx, 0, 2, DType::kBool);
}

void infer_pow(InferContext& ctx) {
  // The exponent may have another numeric dtype; the result has the base's.
  DType exponent = ctx.input_dtype(1);
  if (!dtype_is_float(exponent) && !dtype_is_integer(exponent)) ctx.fail("exponent has dtype ", dtype_name(exponent));
  set_broadcast(ctx, 0, 2, ctx.input_dtype(0));
}

void infer_prelu(InferContext& ctx) {
  require_same_dtypes(ctx, 0, 2);
  const TensorType& x = ctx.input_type(0);
  const TensorType& slope = ctx.input_type(1);
  // slope broadcasts to X, never the other way: X's shape is the output's.
  if (x.rank_known && slope.rank_known) {
    if (slope.rank() > x.rank()) ctx.fail("slope rank ", slope.rank(), " exceeds X rank ", x.rank());
    const size_t pad = x.dims.size() - slope.dims.size();
    for (size_t d = 0; d < slope.dims.size(); ++d) {
      int64_t s = slope.dims[d], n = x.dims[pad + d];
      if (s != 1 && s >= 0 && n >= 0 && s != n) ctx.fail("slope shape ", slope.to_string(), " does not broadcast to X ", x.to_string());
    }
  }
  ctx.output(0) = x;
}

void infer_where(InferContext& ctx) {
  if (ctx.input_dtype(0) != DType::kBool) ctx.fail("condition must be bool, is ", dtype_name(ctx.input_dtype(0)));
  require_same_dtypes(ctx, 1, 3);
  set_broadcast(ctx, 0, 3, ctx.input_dtype(1));
}

void infer_cast(InferContext& ctx) {
  set_like_input0(ctx, 0, dtype_from_onnx_attribute(ctx.node(), "to", ctx.attrs().get_int("to")));
}

void infer_cast_like(InferContext& ctx) { set_like_input0(ctx, 0, ctx.input_dtype(1)); }

void infer_clip(InferContext& ctx) {
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    const TensorType& bound = ctx.input_type(i);
    if (bound.rank_known && shape_numel(bound.dims) != 1 && bound.is_static()) {
      ctx.fail(i == 1 ? "min" : "max", " must be a scalar, has type ", bound.to_string());
    }
  }
  infer_same_as_input0(ctx);
}

/// Clip before opset 11 took min/max as float attributes: make them inputs.
void normalize_clip(Graph& graph, Node& node) {
  if (node.opset >= 11) return;
  std::vector<ValueId> inputs = {node.inputs.at(0), kNoValue, kNoValue};
  const char* names[] = {"min", "max"};
  for (size_t i = 0; i < 2; ++i) {
    const Attribute* a = node.attrs.find(names[i]);
    if (!a) continue;
    Tensor bound(DType::kFloat32, {});
    bound.as<float>()[0] = a->f;
    inputs[i + 1] = graph.add_constant(graph.unique_value_name(node.name + "_" + names[i]), bound);
    node.attrs.erase(names[i]);
  }
  while (inputs.size() > 1 && inputs.back() == kNoValue) inputs.pop_back();
  node.inputs = inputs;
}

void infer_dropout(InferContext& ctx) {
  if (ctx.has_input(2)) {
    if (ctx.input_type(2).dtype != DType::kBool) ctx.fail("training_mode must be bool");
    // Training with ratio 0 keeps every element, so only that case is supported.
    const TensorView* training = ctx.input_value(2);
    const TensorView* ratio = ctx.input_value(1);
    const bool zero_ratio = ratio && ratio->numel() == 1 && view_double_at(*ratio, 0) == 0;
    if (training && training->numel() > 0 && training->as<bool>()[0] && !zero_ratio) {
      throw_unsupported(ctx.node().describe(), ": training_mode=true (random dropout) is not supported");
    }
  }
  infer_same_as_input0(ctx);
  // The mask became bool in opset 10; before, it had the data's dtype.
  if (ctx.num_outputs() > 1) set_like_input0(ctx, 1, ctx.opset() >= 10 ? DType::kBool : ctx.input_dtype(0));
}

OpSchema unary(const char* op, int min_opset, const std::vector<DType>& dtypes, std::vector<AttributeSpec> attrs = {}) {
  return {.op_type = op, .min_opset = min_opset, .attributes = std::move(attrs), .input_dtypes = dtypes,
          .infer = infer_same_as_input0};
}

OpSchema binary(const char* op, int min_opset, const std::vector<DType>& dtypes, InferFn infer,
                std::vector<AttributeSpec> attrs = {}) {
  return {.op_type = op, .min_opset = min_opset, .min_inputs = 2, .max_inputs = 2, .attributes = std::move(attrs),
          .input_dtypes = dtypes, .infer = std::move(infer)};
}

OpSchema variadic(const char* op, const std::vector<DType>& dtypes) {
  // Opset 6..7 required equal shapes, a special case of the later broadcasting.
  return {.op_type = op, .min_opset = 6, .min_inputs = 1, .max_inputs = std::numeric_limits<int>::max(),
          .input_dtypes = dtypes, .infer = infer_broadcast};
}

void register_unary_math(OpRegistry& registry) {
  for (const char* op : {"Reciprocal", "Floor", "Ceil", "Sqrt", "Exp", "Log"}) registry.add(unary(op, 1, kFloats));
  for (const char* op : {"Sin", "Cos", "Tan", "Asin", "Acos", "Atan"}) registry.add(unary(op, 7, kFloats));
  for (const char* op : {"Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf"}) registry.add(unary(op, 9, kFloats));
  registry.add(unary("Round", 11, kFloats));
  registry.add(unary("Abs", 1, kNumbers));
  registry.add(unary("Neg", 1, kSignedNumbers));
  registry.add(unary("Sign", 9, kNumbers));
  registry.add({.op_type = "IsNaN", .min_opset = 9, .input_dtypes = kFloats, .infer = infer_bool_like_input0});
  registry.add({.op_type = "IsInf", .min_opset = 10,
                .attributes = {int_attr("detect_positive", 1), int_attr("detect_negative", 1)},
                .input_dtypes = kFloats, .infer = infer_bool_like_input0});
  registry.add({.op_type = "Not", .min_opset = 1, .input_dtypes = kBool, .infer = infer_bool_like_input0});
}

void register_activations(OpRegistry& registry) {
  registry.add(unary("Relu", 1, kSignedNumbers));
  registry.add(unary("LeakyRelu", 1, kFloats, {float_attr("alpha", 0.01f)}));
  registry.add(binary("PRelu", 7, kNumbers, infer_prelu));
  registry.add(unary("Sigmoid", 1, kFloats));
  registry.add(unary("Tanh", 1, kFloats));
  registry.add(unary("HardSigmoid", 1, kFloats, {float_attr("alpha", 0.2f), float_attr("beta", 0.5f)}));
  registry.add(unary("HardSwish", 14, kFloats));
  registry.add({.op_type = "Clip", .min_opset = 6, .min_inputs = 1, .max_inputs = 3,
                .attributes = {{"min", Kind::kFloat}, {"max", Kind::kFloat}}, .input_dtypes = kNumbers,
                .normalize = normalize_clip, .infer = infer_clip});
  registry.add(unary("Softplus", 1, kFloats));
  registry.add(unary("Softsign", 1, kFloats));
  registry.add(unary("Elu", 6, kFloats, {float_attr("alpha", 1.0f)}));
  registry.add(unary("Selu", 6, kFloats,
                     {float_attr("alpha", 1.67326319217681884765625f), float_attr("gamma", 1.05070102214813232421875f)}));
  registry.add(unary("Celu", 12, kFloats, {float_attr("alpha", 1.0f)}));
  registry.add(unary("ThresholdedRelu", 10, kFloats, {float_attr("alpha", 1.0f)}));
  registry.add(unary("Shrink", 9, kNumbers, {float_attr("bias", 0.0f), float_attr("lambd", 0.5f)}));
}

void register_binary(OpRegistry& registry) {
  // Before opset 7 these took `broadcast`/`axis` attributes with other rules.
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) registry.add(binary(op, 7, kNumbers, infer_broadcast));
  registry.add(binary("Pow", 7, kNumbers, infer_pow));
  registry.add(binary("Mod", 10, kNumbers, infer_broadcast, {int_attr("fmod", 0)}));
  registry.add(binary("BitShift", 11, kUnsigned, infer_broadcast, {{"direction", Kind::kString, std::nullopt, true}}));
  for (const char* op : {"And", "Or", "Xor"}) registry.add(binary(op, 7, kBool, infer_logic));
  registry.add(binary("Equal", 7, kNumbersAndBool, infer_compare));
  for (const char* op : {"Less", "Greater"}) registry.add(binary(op, 7, kNumbers, infer_compare));
  for (const char* op : {"LessOrEqual", "GreaterOrEqual"}) registry.add(binary(op, 12, kNumbers, infer_compare));
}

void register_other(OpRegistry& registry) {
  for (const char* op : {"Max", "Min"}) registry.add(variadic(op, kNumbers));
  for (const char* op : {"Sum", "Mean"}) registry.add(variadic(op, kFloats));
  registry.add({.op_type = "Where", .min_opset = 9, .min_inputs = 3, .max_inputs = 3, .input_dtypes = kBool,
                .infer = infer_where});
  // Cast and CastLike convert to and from strings too (decimal text; elementwise_string.cc).
  registry.add({.op_type = "Cast", .min_opset = 6, .attributes = {{"to", Kind::kInt, std::nullopt, true}},
                .input_dtypes = kNumbersBoolAndString, .infer = infer_cast, .strings = true});
  registry.add({.op_type = "CastLike", .min_opset = 15, .min_inputs = 2, .max_inputs = 2,
                .input_dtypes = kNumbersBoolAndString, .infer = infer_cast_like, .strings = true});
  // Identity passes sequences and optionals through too (opset 14 on).
  registry.add({.op_type = "Identity", .min_opset = 1,
                .infer = [](InferContext& ctx) {
                  if (!ctx.input_type(0).is_tensor()) {
                    ctx.output(0) = ctx.input_type(0);
                  } else {
                    infer_same_as_input0(ctx);
                  }
                },
                .boxed_values = true, .strings = true});
  // Opset 12 turned ratio into an input and added training_mode; only inference is supported.
  registry.add({.op_type = "Dropout", .min_opset = 7, .min_inputs = 1, .max_inputs = 3, .min_outputs = 1,
                .max_outputs = 2, .attributes = {float_attr("ratio", 0.5f), {"seed", Kind::kInt}},
                .input_dtypes = kFloats, .infer = infer_dropout});
}

}  // namespace

void register_elementwise_ops(OpRegistry& registry) {
  register_unary_math(registry);
  register_activations(registry);
  register_binary(registry);
  register_other(registry);
}

}  // namespace tessera
