// Schema of StringNormalizer (text family): removes stop words from a 1-D
// [C] or 2-D [1, C] string tensor and changes the case of what is left.
#include "ir/op_schema.h"
#include "ir/ops/text_internal.h"

namespace tessera {
namespace {

using Kind = Attribute::Kind;

void infer_string_normalizer(InferContext& ctx) {
  const TensorType& x = ctx.input_type(0);
  if (x.dtype != DType::kString) ctx.fail("input must be a string tensor, got ", x.to_string());
  const std::string action = ctx.attrs().get_string_or("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER") {
    ctx.fail("attribute 'case_change_action' is '", action, "'; it must be NONE, LOWER or UPPER");
  }
  if (x.rank_known && x.rank() != 1 && !(x.rank() == 2 && (x.dims[0] == 1 || x.dims[0] < 0))) {
    ctx.fail("input must be 1-D [C] or 2-D [1, C], got ", x.to_string());
  }
  // How many strings are left depends on the data.
  ctx.set_output_unknown(0, DType::kString, x.rank_known ? x.rank() : -1);
  if (x.rank_known && x.rank() == 2) ctx.output(0).dims[0] = 1;
}

}  // namespace

void register_string_normalizer(OpRegistry& registry) {
  registry.add({.op_type = "StringNormalizer", .min_opset = 10,
                .attributes = {{"case_change_action", Kind::kString, Attribute::of_string("NONE")},
                               {"is_case_sensitive", Kind::kInt, Attribute::of_int(0)},
                               {"locale", Kind::kString, std::nullopt},
                               {"stopwords", Kind::kStrings, std::nullopt}},
                .input_dtypes = {DType::kString}, .infer = infer_string_normalizer, .data_dependent_output = true,
                .strings = true});
}

}  // namespace tessera
