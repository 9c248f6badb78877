// StringNormalizer (schema in src/ir/ops/text_normalizer.cc). Case changes and
// case-insensitive stop-word matching fold ASCII letters only; other bytes
// (UTF-8 text beyond ASCII) are compared and kept as they are.
#include <set>
#include <string>

#include "backends/native/kernel.h"

namespace tessera::native {
namespace {

std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

void string_normalizer_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (x.dtype != DType::kString) ctx.fail("input must be a string tensor, got ", dtype_name(x.dtype));
  if (x.rank() != 1 && !(x.rank() == 2 && x.shape[0] == 1)) {
    ctx.fail("input must be 1-D [C] or 2-D [1, C], got shape ", shape_to_string(x.shape));
  }
  const bool case_sensitive = ctx.attrs().get_int_or("is_case_sensitive", 0) != 0;
  const std::string action = ctx.attrs().get_string_or("case_change_action", "NONE");
  std::set<std::string> stopwords;
  for (const std::string& w : ctx.attrs().get_strings_or("stopwords", {})) stopwords.insert(case_sensitive ? w : ascii_lower(w));
  std::vector<std::string> kept;
  const auto* in = x.as<std::string>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (stopwords.count(case_sensitive ? in[i] : ascii_lower(in[i]))) continue;
    kept.push_back(action == "LOWER" ? ascii_lower(in[i]) : action == "UPPER" ? ascii_upper(in[i]) : in[i]);
  }
  // Everything removed: one empty string, as ONNX specifies.
  if (kept.empty()) kept.emplace_back();
  Shape shape = x.rank() == 1 ? Shape{static_cast<int64_t>(kept.size())} : Shape{1, static_cast<int64_t>(kept.size())};
  TensorView& out = ctx.allocate_output(0, DType::kString, shape);
  auto* y = out.as<std::string>();
  for (size_t i = 0; i < kept.size(); ++i) y[i] = std::move(kept[i]);
}

}  // namespace

void register_string_normalizer_kernel(KernelRegistry& registry) {
  registry.add({.op_type = "StringNormalizer", .run = string_normalizer_kernel});
}

}  // namespace tessera::native
