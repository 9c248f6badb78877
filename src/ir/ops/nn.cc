// Schemas of the nn family: Gemm and MatMul here; convolution, pooling and
// normalisation ops in nn_conv.cc, nn_pool.cc and nn_norm.cc.
#include "ir/op_schema.h"
#include "ir/ops/nn_internal.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

const std::vector<DType> kMatrixTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt32,
                                         DType::kInt64,   DType::kUInt32,  DType::kUInt64};

void infer_gemm(InferContext& ctx) {
  const TensorType& a = ctx.input_type(0);
  const TensorType& b = ctx.input_type(1);
  if (a.dtype != b.dtype) ctx.fail("A is ", dtype_name(a.dtype), " but B is ", dtype_name(b.dtype));
  if (!a.rank_known || !b.rank_known) return ctx.set_output_unknown(0, a.dtype, 2);
  if (a.rank() != 2 || b.rank() != 2) ctx.fail("A and B must be 2-D, got ", a.to_string(), " and ", b.to_string());
  const bool trans_a = ctx.attrs().get_int_or("transA", 0) != 0;
  const bool trans_b = ctx.attrs().get_int_or("transB", 0) != 0;
  int64_t m = a.dims[trans_a ? 1 : 0], ka = a.dims[trans_a ? 0 : 1];
  int64_t kb = b.dims[trans_b ? 1 : 0], n = b.dims[trans_b ? 0 : 1];
  if (ka >= 0 && kb >= 0 && ka != kb) ctx.fail("inner dimensions differ: A gives K=", ka, ", B gives K=", kb);
  if (ctx.has_input(2)) {
    const TensorType& c = ctx.input_type(2);
    if (c.dtype != a.dtype) ctx.fail("C is ", dtype_name(c.dtype), " but A is ", dtype_name(a.dtype));
    if (c.rank_known && m >= 0 && n >= 0 && c.is_static()) {
      try {
        Shape out = broadcast_shapes(c.dims, {m, n});
        if (out != Shape{m, n}) ctx.fail("C of shape ", c.to_string(), " does not broadcast to ", m, "x", n);
      } catch (const Error& e) {
        ctx.fail("C of shape ", c.to_string(), " does not broadcast to ", m, "x", n);
      }
    }
  }
  ctx.set_output(0, a.dtype, {m, n});
}

void infer_matmul(InferContext& ctx) {
  const TensorType& a = ctx.input_type(0);
  const TensorType& b = ctx.input_type(1);
  // The native backend's MatMulInt8Weights composite lowers to a MatMul of float32 A and int8 B that
  // carries B's scales (tessera_int8_scales): a float32 product.
  const bool int8_weights = a.dtype == DType::kFloat32 && b.dtype == DType::kInt8 && ctx.attrs().has("tessera_int8_scales");
  if (a.dtype != b.dtype && !int8_weights) ctx.fail("A is ", dtype_name(a.dtype), " but B is ", dtype_name(b.dtype));
  // The native backend's MatMulTransposedB composite: B as stored is [..., N, K] (the input of the
  // Transpose it absorbed), read transposed.
  set_matmul_output(ctx, 0, 1, a.dtype, ctx.attrs().get_int_or("tessera_transpose_b", 0) != 0);
}

}  // namespace

void set_matmul_output(InferContext& ctx, size_t a_input, size_t b_input, DType dtype, bool transpose_b) {
  const TensorType& a = ctx.input_type(a_input);
  const TensorType& b = ctx.input_type(b_input);
  if (!a.rank_known || !b.rank_known) return ctx.set_output_unknown(0, dtype);
  if (a.rank() == 0 || b.rank() == 0) ctx.fail("operands must have rank >= 1, got ", a.to_string(), " and ", b.to_string());
  Shape da = a.dims, db = b.dims;
  if (transpose_b) {
    if (db.size() < 2) ctx.fail("a transposed B needs rank >= 2, got ", b.to_string());
    std::swap(db[db.size() - 1], db[db.size() - 2]);
  }
  const bool a_vector = da.size() == 1, b_vector = db.size() == 1;
  if (a_vector) da.insert(da.begin(), 1);
  if (b_vector) db.push_back(1);
  const int64_t k1 = da.back(), k2 = db[db.size() - 2];
  if (k1 >= 0 && k2 >= 0 && k1 != k2) ctx.fail("inner dimensions differ: ", a.to_string(), " x ", b.to_string());
  Shape batch_a(da.begin(), da.end() - 2), batch_b(db.begin(), db.end() - 2);
  Shape out;
  try {
    out = broadcast_shapes(batch_a, batch_b);
  } catch (const Error&) {
    ctx.fail("batch dims do not broadcast: ", a.to_string(), " x ", b.to_string());
  }
  if (!a_vector) out.push_back(da[da.size() - 2]);
  if (!b_vector) out.push_back(db.back());
  ctx.set_output(0, dtype, out);
}

void register_nn_ops(OpRegistry& registry) {
  registry.add({.op_type = "Gemm",
                .min_opset = 7,
                .min_inputs = 2,
                .max_inputs = 3,
                .attributes = {{"alpha", Kind::kFloat, Attribute::of_float(1.0f)},
                               {"beta", Kind::kFloat, Attribute::of_float(1.0f)},
                               {"transA", Kind::kInt, Attribute::of_int(0)},
                               {"transB", Kind::kInt, Attribute::of_int(0)}},
                .input_dtypes = kMatrixTypes,
                .infer = infer_gemm,
                .bf16_compute = true});
  registry.add({.op_type = "MatMul",
                .min_opset = 1,
                .min_inputs = 2,
                .max_inputs = 2,
                .input_dtypes = kMatrixTypes,
                .infer = infer_matmul,
                .bf16_compute = true});
  register_nn_conv_ops(registry);
  register_nn_pool_ops(registry);
  register_nn_norm_ops(registry);
}

}  // namespace tessera
