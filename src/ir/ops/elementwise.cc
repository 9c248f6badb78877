// Schemas of element-wise ops: unary math, activations, broadcast binary
// arithmetic, comparisons and logic, Where, Cast.
#include "ir/op_schema.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

void infer_same_as_input0(InferContext& ctx) { ctx.output(0) = ctx.input_type(0); }

void infer_broadcast(InferContext& ctx) {
  const TensorType& a = ctx.input_type(0);
  const TensorType& b = ctx.input_type(1);
  if (a.dtype != b.dtype) ctx.fail("inputs have different dtypes ", dtype_name(a.dtype), " and ", dtype_name(b.dtype));
  if (!a.rank_known || !b.rank_known) return ctx.set_output_unknown(0, a.dtype);
  try {
    ctx.set_output(0, a.dtype, broadcast_shapes(a.dims, b.dims));
  } catch (const Error& e) {
    ctx.fail(e.what());
  }
}

}  // namespace

void register_elementwise_ops(OpRegistry& registry) {
  registry.add({.op_type = "Relu", .min_opset = 1, .input_dtypes = kSignedNumericTypes, .infer = infer_same_as_input0});
  registry.add({.op_type = "Add", .min_opset = 7, .min_inputs = 2, .max_inputs = 2, .input_dtypes = kNumericTypes,
                .infer = infer_broadcast});
}

}  // namespace tessera
