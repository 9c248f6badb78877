// Schemas of the recurrent layers LSTM, GRU and RNN (opsets 7..17; opset 14
// added `layout`, whose default 0 keeps the older form, so one schema each).
// Inputs: X, W, R, B, sequence_lens, initial_h (+ initial_c, P for LSTM).
// Outputs: Y, Y_h (+ Y_c for LSTM), each optional.
#include "ir/op_schema.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

/// What distinguishes the three layers in their schemas.
struct RecurrentKind {
  const char* op_type;
  int64_t gates;  // rows of W per direction are gates * hidden_size
  int max_inputs;
  int max_outputs;
};

constexpr RecurrentKind kLstm{"LSTM", 4, 8, 3};
constexpr RecurrentKind kGru{"GRU", 3, 6, 2};
constexpr RecurrentKind kRnn{"RNN", 1, 6, 2};

std::vector<AttributeSpec> recurrent_attributes(const RecurrentKind& kind) {
  std::vector<AttributeSpec> a = {{"activation_alpha", Kind::kFloats, std::nullopt},
                                  {"activation_beta", Kind::kFloats, std::nullopt},
                                  {"activations", Kind::kStrings, std::nullopt},
                                  {"clip", Kind::kFloat, std::nullopt},
                                  {"direction", Kind::kString, Attribute::of_string("forward")},
                                  {"hidden_size", Kind::kInt, std::nullopt},
                                  {"layout", Kind::kInt, Attribute::of_int(0)}};
  if (kind.gates == 4) a.push_back({"input_forget", Kind::kInt, Attribute::of_int(0)});
  if (kind.gates == 3) a.push_back({"linear_before_reset", Kind::kInt, Attribute::of_int(0)});
  return a;
}

/// Checks one optional input's shape against `expected` (dims < 0 are not checked).
void check_shape(InferContext& ctx, size_t input, const Shape& expected) {
  if (!ctx.has_input(input)) return;
  const TensorType& t = ctx.input_type(input);
  if (!t.rank_known) return;
  bool ok = t.rank() == static_cast<int64_t>(expected.size());
  for (size_t d = 0; ok && d < expected.size(); ++d) {
    if (t.dims[d] >= 0 && expected[d] >= 0 && t.dims[d] != expected[d]) ok = false;
  }
  if (!ok) ctx.fail(ctx.input_label(input), " has shape ", t.to_string(), ", expected ", TensorType::make(t.dtype, expected).to_string());
}

void infer_recurrent(InferContext& ctx, const RecurrentKind& kind) {
  const TensorType& x = ctx.input_type(0);
  const TensorType& w = ctx.input_type(1);
  const TensorType& r = ctx.input_type(2);
  const std::string direction = ctx.attrs().get_string_or("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") {
    ctx.fail("direction '", direction, "' is not one of forward, reverse, bidirectional");
  }
  const int64_t layout = ctx.attrs().get_int_or("layout", 0);
  if (layout != 0 && layout != 1) ctx.fail("layout = ", layout, " must be 0 or 1");
  const int64_t directions = direction == "bidirectional" ? 2 : 1;
  for (size_t i : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{6}, size_t{7}}) {
    if (ctx.has_input(i) && ctx.input_dtype(i) != x.dtype) {
      ctx.fail(ctx.input_label(i), " is ", dtype_name(ctx.input_dtype(i)), " but X is ", dtype_name(x.dtype));
    }
  }
  if (ctx.has_input(4) && ctx.input_dtype(4) != DType::kInt32) {
    ctx.fail("sequence_lens is ", dtype_name(ctx.input_dtype(4)), ", expected int32");
  }
  if (x.rank_known && x.rank() != 3) ctx.fail("X must have rank 3, got ", x.to_string());
  if (w.rank_known && w.rank() != 3) ctx.fail("W must have rank 3, got ", w.to_string());
  if (r.rank_known && r.rank() != 3) ctx.fail("R must have rank 3, got ", r.to_string());

  int64_t hidden = ctx.attrs().get_int_or("hidden_size", -1);
  if (hidden < 0 && r.rank_known) hidden = r.dims[2];
  if (hidden < 0 && w.rank_known && w.dims[1] >= 0) hidden = w.dims[1] / kind.gates;
  if (ctx.attrs().has("hidden_size") && hidden <= 0) ctx.fail("hidden_size = ", hidden, " must be positive");
  const int64_t seq = x.rank_known ? x.dims[layout == 0 ? 0 : 1] : -1;
  const int64_t batch = x.rank_known ? x.dims[layout == 0 ? 1 : 0] : -1;
  const int64_t input_size = x.rank_known ? x.dims[2] : -1;
  const int64_t gate_rows = hidden >= 0 ? kind.gates * hidden : -1;
  check_shape(ctx, 1, {directions, gate_rows, input_size});
  check_shape(ctx, 2, {directions, gate_rows, hidden});
  check_shape(ctx, 3, {directions, hidden >= 0 ? 2 * gate_rows : -1});
  check_shape(ctx, 4, {batch});
  const Shape state = layout == 0 ? Shape{directions, batch, hidden} : Shape{batch, directions, hidden};
  check_shape(ctx, 5, state);
  if (kind.gates == 4) {
    check_shape(ctx, 6, state);
    check_shape(ctx, 7, {directions, hidden >= 0 ? 3 * hidden : -1});
  }
  const Shape y = layout == 0 ? Shape{seq, directions, batch, hidden} : Shape{batch, seq, directions, hidden};
  const bool known = seq >= 0 && batch >= 0 && hidden >= 0;
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (!known) {
      ctx.set_output_unknown(i, x.dtype, i == 0 ? 4 : 3);
    } else {
      ctx.set_output(i, x.dtype, i == 0 ? y : state);
    }
  }
}

void add_recurrent(OpRegistry& registry, const RecurrentKind& kind) {
  registry.add({.op_type = kind.op_type,
                .min_opset = 7,
                .min_inputs = 3,
                .max_inputs = kind.max_inputs,
                .min_outputs = 0,
                .max_outputs = kind.max_outputs,
                .attributes = recurrent_attributes(kind),
                .input_dtypes = kFloatTypes,
                .infer = [kind](InferContext& ctx) { infer_recurrent(ctx, kind); }});
}

}  // namespace

void register_recurrent_ops(OpRegistry& registry) {
  add_recurrent(registry, kLstm);
  add_recurrent(registry, kGru);
  add_recurrent(registry, kRnn);
}

}  // namespace tessera
