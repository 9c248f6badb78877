// Schemas of the sequence and optional family: SequenceEmpty, SequenceConstruct,
// SequenceInsert, SequenceAt, SequenceErase, SequenceLength, SplitToSequence,
// ConcatFromSequence, SequenceMap, Optional, OptionalHasElement and
// OptionalGetElement. Their inputs and outputs may be sequences or optionals
// (OpSchema::boxed_values); each infer checks the kinds it gets. A sequence's
// type carries its tensors' dtype and the dims they all share (-1 elsewhere).
#include <algorithm>

#include "ir/op_schema.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

/// The element type two tensors share: the dtype (one must be undefined or
/// equal) and the dims where both ranks and values agree.
TensorType shared_element(const TensorType& a, const TensorType& b) {
  if (a.dtype == DType::kUndefined && !a.rank_known) return b.element();
  if (b.dtype == DType::kUndefined && !b.rank_known) return a.element();
  TensorType out;
  out.dtype = a.dtype != DType::kUndefined ? a.dtype : b.dtype;
  if (a.rank_known && b.rank_known && a.rank() == b.rank()) {
    out.rank_known = true;
    for (size_t d = 0; d < a.dims.size(); ++d) out.dims.push_back(a.dims[d] == b.dims[d] ? a.dims[d] : -1);
  }
  return out;
}

const TensorType& sequence_input(InferContext& ctx, size_t i) {
  const TensorType& t = ctx.input_type(i);
  if (t.kind != ValueKind::kSequence) ctx.fail(ctx.input_label(i), " must be a sequence, got ", t.to_string());
  return t;
}

const TensorType& tensor_input(InferContext& ctx, size_t i) {
  const TensorType& t = ctx.input_type(i);
  if (!t.is_tensor()) ctx.fail(ctx.input_label(i), " must be a tensor, got ", t.to_string());
  return t;
}

void check_same_dtype(InferContext& ctx, const TensorType& sequence, const TensorType& tensor, size_t tensor_input_index) {
  if (sequence.dtype != DType::kUndefined && tensor.dtype != DType::kUndefined && sequence.dtype != tensor.dtype) {
    ctx.fail(ctx.input_label(tensor_input_index), " is ", dtype_name(tensor.dtype), " but the sequence holds ",
             dtype_name(sequence.dtype));
  }
}

void check_position(InferContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return;
  const TensorType& p = tensor_input(ctx, i);
  if (p.dtype != DType::kInt32 && p.dtype != DType::kInt64) ctx.fail("position must be int32 or int64, got ", dtype_name(p.dtype));
  // A scalar; a one-element 1-D tensor is taken too (exporters and ONNX's own test data write [1]).
  if (p.rank_known && p.rank() > 1) ctx.fail("position must be a scalar, got rank ", p.rank());
}

void infer_sequence_empty(InferContext& ctx) {
  TensorType element;
  element.dtype = dtype_from_onnx_attribute(ctx.node(), "dtype", ctx.attrs().get_int_or("dtype", 1));
  ctx.output(0) = TensorType::of_kind(ValueKind::kSequence, element);
}

void infer_sequence_construct(InferContext& ctx) {
  TensorType element = tensor_input(ctx, 0).element();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const TensorType& t = tensor_input(ctx, i);
    if (element.dtype != DType::kUndefined && t.dtype != DType::kUndefined && t.dtype != element.dtype) {
      ctx.fail(ctx.input_label(i), " is ", dtype_name(t.dtype), " but input 0 is ", dtype_name(element.dtype),
               "; a sequence holds one dtype");
    }
    element = shared_element(element, t);
  }
  ctx.output(0) = TensorType::of_kind(ValueKind::kSequence, element);
}

void infer_sequence_insert(InferContext& ctx) {
  const TensorType& sequence = sequence_input(ctx, 0);
  const TensorType& tensor = tensor_input(ctx, 1);
  check_same_dtype(ctx, sequence, tensor, 1);
  check_position(ctx, 2);
  // An empty sequence's type says nothing of its tensors' shapes; the inserted tensor's does.
  ctx.output(0) = TensorType::of_kind(ValueKind::kSequence, shared_element(sequence.element(), tensor));
}

void infer_sequence_at(InferContext& ctx) {
  const TensorType& sequence = sequence_input(ctx, 0);
  check_position(ctx, 1);
  TensorType element = sequence.element();
  element.symbols.clear();
  ctx.output(0) = element;
}

void infer_sequence_erase(InferContext& ctx) {
  const TensorType& sequence = sequence_input(ctx, 0);
  check_position(ctx, 1);
  ctx.output(0) = sequence;
}

void infer_sequence_length(InferContext& ctx) {
  sequence_input(ctx, 0);
  ctx.set_output(0, DType::kInt64, {});
}

void infer_split_to_sequence(InferContext& ctx) {
  const TensorType& input = tensor_input(ctx, 0);
  TensorType element;
  element.dtype = input.dtype;
  if (input.rank_known) {
    int64_t axis = ctx.attrs().get_int_or("axis", 0);
    if (axis < -input.rank() || axis >= input.rank()) ctx.fail("axis ", axis, " is out of range for rank ", input.rank());
    if (axis < 0) axis += input.rank();
    const bool drop_axis = !ctx.has_input(1) && ctx.attrs().get_int_or("keepdims", 1) == 0;
    element.rank_known = true;
    for (int64_t d = 0; d < input.rank(); ++d) {
      if (d == axis) {
        if (drop_axis) continue;
        element.dims.push_back(!ctx.has_input(1) ? 1 : -1);  // split sizes may differ
      } else {
        element.dims.push_back(input.dims[static_cast<size_t>(d)]);
      }
    }
  }
  if (ctx.has_input(1)) {
    const TensorType& split = tensor_input(ctx, 1);
    if (split.dtype != DType::kInt32 && split.dtype != DType::kInt64) ctx.fail("split must be int32 or int64, got ", dtype_name(split.dtype));
    if (split.rank_known && split.rank() > 1) ctx.fail("split must be a scalar or 1-D, got rank ", split.rank());
  }
  ctx.output(0) = TensorType::of_kind(ValueKind::kSequence, element);
}

void infer_concat_from_sequence(InferContext& ctx) {
  const TensorType& sequence = sequence_input(ctx, 0);
  const int64_t new_axis = ctx.attrs().get_int_or("new_axis", 0);
  if (new_axis != 0 && new_axis != 1) ctx.fail("new_axis must be 0 or 1, got ", new_axis);
  if (!sequence.rank_known) return ctx.set_output_unknown(0, sequence.dtype);
  const int64_t rank = sequence.rank() + new_axis;
  const int64_t axis = ctx.attrs().get_int("axis");
  if (axis < -rank || axis >= rank) ctx.fail("axis ", axis, " is out of range for rank ", rank);
  ctx.set_output_unknown(0, sequence.dtype, rank);
}

void infer_optional(InferContext& ctx) {
  if (ctx.has_input(0)) {
    const TensorType& t = ctx.input_type(0);
    if (t.is_optional()) ctx.fail("input 0 is already an optional (", t.to_string(), ")");
    ctx.output(0) = TensorType::of_kind(t.is_tensor() ? ValueKind::kOptionalTensor : ValueKind::kOptionalSequence, t);
    return;
  }
  const Attribute* type = ctx.attrs().find("type");
  if (!type) ctx.fail("an Optional without input needs the attribute 'type'");
  const TensorType t = decode_type_attribute(type->ints, ctx.node().describe() + ": attribute 'type'");
  if (t.is_optional()) ctx.fail("attribute 'type' is an optional type; Optional wraps a tensor or a sequence");
  ctx.output(0) = TensorType::of_kind(t.is_tensor() ? ValueKind::kOptionalTensor : ValueKind::kOptionalSequence, t);
}

void infer_optional_has_element(InferContext& ctx) {
  ctx.set_output(0, DType::kBool, {});
}

void infer_optional_get_element(InferContext& ctx) {
  const TensorType& t = ctx.input_type(0);
  switch (t.kind) {
    case ValueKind::kOptionalTensor: ctx.output(0) = t.element(); break;
    case ValueKind::kOptionalSequence: ctx.output(0) = TensorType::of_kind(ValueKind::kSequence, t); break;
    default: ctx.output(0) = t;  // opset 18 lets a tensor or sequence through unchanged
  }
}

const Graph& body_of(const InferContext& ctx) {
  const Attribute* a = ctx.attrs().find("body");
  if (!a || a->kind != Kind::kGraph || !a->graph) ctx.fail("attribute 'body' must be a subgraph");
  return *a->graph;
}

/// SequenceMap: the body runs once per position of the sequence inputs, on
/// their tensors at that position and on the tensor inputs as they are; each
/// body output gathers into one output sequence.
void infer_sequence_map(InferContext& ctx) {
  const Graph& body = body_of(ctx);
  const size_t formal = static_cast<size_t>(ctx.attrs().get_int_or("tessera_formal_inputs", static_cast<int64_t>(ctx.num_inputs())));
  sequence_input(ctx, 0);
  if (body.inputs.size() != ctx.num_inputs()) {
    ctx.fail("body has ", body.inputs.size(), " inputs but the node has ", ctx.num_inputs(), " (", formal, " formal)");
  }
  if (body.outputs.size() != ctx.num_outputs()) {
    ctx.fail("body has ", body.outputs.size(), " outputs but the node has ", ctx.num_outputs());
  }
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    TensorType element = body.value(body.outputs[i]).type.element();
    element.symbols.clear();
    ctx.output(i) = TensorType::of_kind(ValueKind::kSequence, element);
  }
}

constexpr int kManyInputs = 1 << 20;

}  // namespace

void register_sequence_ops(OpRegistry& registry) {
  registry.add({.op_type = "SequenceEmpty", .min_opset = 11, .min_inputs = 0, .max_inputs = 0,
                .attributes = {{"dtype", Kind::kInt, std::nullopt}}, .infer = infer_sequence_empty, .boxed_values = true});
  registry.add({.op_type = "SequenceConstruct", .min_opset = 11, .min_inputs = 1, .max_inputs = kManyInputs,
                .infer = infer_sequence_construct, .boxed_values = true});
  registry.add({.op_type = "SequenceInsert", .min_opset = 11, .min_inputs = 2, .max_inputs = 3,
                .infer = infer_sequence_insert, .boxed_values = true});
  registry.add({.op_type = "SequenceAt", .min_opset = 11, .min_inputs = 2, .max_inputs = 2, .infer = infer_sequence_at,
                .boxed_values = true});
  registry.add({.op_type = "SequenceErase", .min_opset = 11, .min_inputs = 1, .max_inputs = 2,
                .infer = infer_sequence_erase, .boxed_values = true});
  registry.add({.op_type = "SequenceLength", .min_opset = 11, .min_inputs = 1, .max_inputs = 1,
                .infer = infer_sequence_length, .boxed_values = true});
  registry.add({.op_type = "SplitToSequence", .min_opset = 11, .min_inputs = 1, .max_inputs = 2,
                .attributes = {{"axis", Kind::kInt, Attribute::of_int(0)}, {"keepdims", Kind::kInt, Attribute::of_int(1)}},
                .infer = infer_split_to_sequence, .boxed_values = true});
  registry.add({.op_type = "ConcatFromSequence", .min_opset = 11, .min_inputs = 1, .max_inputs = 1,
                .attributes = {{"axis", Kind::kInt, std::nullopt, true}, {"new_axis", Kind::kInt, Attribute::of_int(0)}},
                .infer = infer_concat_from_sequence, .boxed_values = true});
  registry.add({.op_type = "SequenceMap", .min_opset = 17, .min_inputs = 1, .max_inputs = kManyInputs, .min_outputs = 1,
                .max_outputs = kManyInputs, .attributes = {{"body", Kind::kGraph, std::nullopt, true}},
                .infer = infer_sequence_map, .data_dependent_output = true, .boxed_values = true});
  registry.add({.op_type = "Optional", .min_opset = 15, .min_inputs = 0, .max_inputs = 1,
                .attributes = {{"type", Kind::kInts, std::nullopt}}, .infer = infer_optional, .boxed_values = true});
  registry.add({.op_type = "OptionalHasElement", .min_opset = 15, .min_inputs = 1, .max_inputs = 1,
                .infer = infer_optional_has_element, .boxed_values = true});
  registry.add({.op_type = "OptionalGetElement", .min_opset = 15, .min_inputs = 1, .max_inputs = 1,
                .infer = infer_optional_get_element, .boxed_values = true});
}

}  // namespace tessera
