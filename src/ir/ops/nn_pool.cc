// Schemas of the pooling ops: MaxPool (with optional Indices), AveragePool,
// LpPool and their Global forms.
#include "ir/op_schema.h"
#include "ir/ops/nn_internal.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

const std::vector<DType> kMaxPoolTypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kInt8, DType::kUInt8};

std::vector<AttributeSpec> pool_attributes(const std::string& op) {
  std::vector<AttributeSpec> a = {{"auto_pad", Kind::kString, Attribute::of_string("NOTSET")},
                                  {"kernel_shape", Kind::kInts, std::nullopt, true},
                                  {"pads", Kind::kInts, std::nullopt},
                                  {"strides", Kind::kInts, std::nullopt}};
  if (op != "LpPool") a.push_back({"ceil_mode", Kind::kInt, Attribute::of_int(0)});
  if (op == "MaxPool") {
    a.push_back({"dilations", Kind::kInts, std::nullopt});
    a.push_back({"storage_order", Kind::kInt, Attribute::of_int(0)});
  }
  if (op == "AveragePool") a.push_back({"count_include_pad", Kind::kInt, Attribute::of_int(0)});
  if (op == "LpPool") a.push_back({"p", Kind::kInt, Attribute::of_int(2)});
  return a;
}

void infer_pool(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  if (!x.rank_known) return ctx.set_output_unknown(0, x.dtype);
  if (x.rank() < 3) ctx.fail("X must have rank >= 3 (N, C, spatial...), got ", x.to_string());
  std::vector<int64_t> kernel = ctx.attrs().get_ints_or("kernel_shape", {});
  if (static_cast<int64_t>(kernel.size()) != x.rank() - 2) {
    ctx.fail("kernel_shape has ", kernel.size(), " values but X ", x.to_string(), " has ", x.rank() - 2, " spatial dims");
  }
  if (!x.is_static()) {
    for (size_t i = 0; i < ctx.num_outputs(); ++i) ctx.set_output_unknown(i, i == 0 ? x.dtype : DType::kInt64, x.rank());
    return;
  }
  std::vector<int64_t> in(x.dims.begin() + 2, x.dims.end());
  WindowGeometry g = window_geometry(ctx.node(), in, kernel, true);
  Shape out = {x.dims[0], x.dims[1]};
  out.insert(out.end(), g.output.begin(), g.output.end());
  ctx.set_output(0, x.dtype, out);
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kInt64, out);
}

void infer_global_pool(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  if (!x.rank_known) return ctx.set_output_unknown(0, x.dtype);
  if (x.rank() < 3) ctx.fail("X must have rank >= 3 (N, C, spatial...), got ", x.to_string());
  Shape out = x.dims;
  for (size_t d = 2; d < out.size(); ++d) out[d] = 1;
  ctx.set_output(0, x.dtype, out);
}

}  // namespace

void register_nn_pool_ops(OpRegistry& registry) {
  registry.add({.op_type = "MaxPool",
                .min_opset = 1,
                .max_outputs = 2,
                .attributes = pool_attributes("MaxPool"),
                .input_dtypes = kMaxPoolTypes,
                .infer = infer_pool});
  registry.add({.op_type = "AveragePool", .min_opset = 1, .attributes = pool_attributes("AveragePool"),
                .input_dtypes = kFloatTypes, .infer = infer_pool});
  registry.add({.op_type = "LpPool", .min_opset = 1, .attributes = pool_attributes("LpPool"),
                .input_dtypes = kFloatTypes, .infer = infer_pool});
  registry.add({.op_type = "GlobalAveragePool", .min_opset = 1, .input_dtypes = kFloatTypes, .infer = infer_global_pool});
  registry.add({.op_type = "GlobalMaxPool", .min_opset = 1, .input_dtypes = kFloatTypes, .infer = infer_global_pool});
  registry.add({.op_type = "GlobalLpPool",
                .min_opset = 2,
                .attributes = {{"p", Kind::kInt, Attribute::of_int(2)}},
                .input_dtypes = kFloatTypes,
                .infer = infer_global_pool});
}

}  // namespace tessera
