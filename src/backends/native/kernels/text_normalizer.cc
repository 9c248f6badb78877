// StringNormalizer (schema in src/ir/ops/text_normalizer.cc). Case changes and
// case-insensitive stop-word matching map each Unicode character of the UTF-8
// text with the C library's wide-character case tables: those of the node's
// `locale` (e.g. en_US, tried as en_US.UTF-8) when this machine has it, else
// C.UTF-8's (Unicode's simple case mappings), else ASCII only. Bytes that are
// not valid UTF-8 are kept as they are.
#include <locale.h>
#include <wctype.h>

#include <map>
#include <mutex>
#include <set>
#include <string>

#include "backends/native/kernel.h"
#include "ir/utf8.h"

namespace tessera::native {
namespace {

/// The case tables for `name` (an ONNX locale such as "en_US"), or C.UTF-8's, or null (ASCII only).
/// Made once per name and kept for the process (locale objects are never freed here).
locale_t case_locale(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, locale_t> made;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = made.find(name);
  if (it != made.end()) return it->second;
  locale_t l = nullptr;
  if (!name.empty()) l = newlocale(LC_CTYPE_MASK, (name + ".UTF-8").c_str(), static_cast<locale_t>(nullptr));
  if (!l) l = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  made[name] = l;
  return l;
}

/// `s` with every character mapped to upper (or lower) case.
std::string change_case(const std::string& s, bool upper, locale_t l) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    if (!next_code_point(s, i, cp)) {
      out += s[i++];  // not UTF-8: kept
      continue;
    }
    wint_t mapped = static_cast<wint_t>(cp);
    if (l) {
      mapped = upper ? towupper_l(mapped, l) : towlower_l(mapped, l);
    } else if (cp < 0x80) {
      mapped = upper ? (cp >= 'a' && cp <= 'z' ? cp - 32 : cp) : (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    }
    const uint32_t result = static_cast<uint32_t>(mapped);
    append_utf8(out, result <= 0x10FFFF && !(result >= 0xD800 && result <= 0xDFFF) ? result : cp);
  }
  return out;
}

void string_normalizer_kernel(KernelContext& ctx) {
  const TensorView& x = ctx.input(0);
  if (x.dtype != DType::kString) ctx.fail("input must be a string tensor, got ", dtype_name(x.dtype));
  if (x.rank() != 1 && !(x.rank() == 2 && x.shape[0] == 1)) {
    ctx.fail("input must be 1-D [C] or 2-D [1, C], got shape ", shape_to_string(x.shape));
  }
  const bool case_sensitive = ctx.attrs().get_int_or("is_case_sensitive", 0) != 0;
  const std::string action = ctx.attrs().get_string_or("case_change_action", "NONE");
  const locale_t l = case_locale(ctx.attrs().get_string_or("locale", ""));
  auto lower = [&](const std::string& text) { return change_case(text, false, l); };
  auto upper = [&](const std::string& text) { return change_case(text, true, l); };
  std::set<std::string> stopwords;
  for (const std::string& w : ctx.attrs().get_strings_or("stopwords", {})) stopwords.insert(case_sensitive ? w : lower(w));
  std::vector<std::string> kept;
  const auto* in = x.as<std::string>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (stopwords.count(case_sensitive ? in[i] : lower(in[i]))) continue;
    kept.push_back(action == "LOWER" ? lower(in[i]) : action == "UPPER" ? upper(in[i]) : in[i]);
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
