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

/// The code point of the UTF-8 sequence at s[i] and its length, or -1 when it is not valid UTF-8.
int32_t decode(const std::string& s, size_t i, size_t& length) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  int32_t cp;
  if (b < 0x80) { length = 1; return b; }
  if ((b & 0xE0) == 0xC0) { length = 2; cp = b & 0x1F; }
  else if ((b & 0xF0) == 0xE0) { length = 3; cp = b & 0x0F; }
  else if ((b & 0xF8) == 0xF0) { length = 4; cp = b & 0x07; }
  else return -1;
  if (i + length > s.size()) return -1;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return -1;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  const int32_t smallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < smallest[length] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  return cp;
}

void encode(int32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// `s` with every character mapped to upper (or lower) case.
std::string change_case(const std::string& s, bool upper, locale_t l) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t length = 1;
    const int32_t cp = decode(s, i, length);
    if (cp < 0) {
      out += s[i++];  // not UTF-8: kept
      continue;
    }
    wint_t mapped = static_cast<wint_t>(cp);
    if (l) {
      mapped = upper ? towupper_l(mapped, l) : towlower_l(mapped, l);
    } else if (cp < 0x80) {
      mapped = upper ? (cp >= 'a' && cp <= 'z' ? cp - 32 : cp) : (cp >= 'A' && cp <= 'Z' ? cp + 32 : cp);
    }
    const int32_t result = static_cast<int32_t>(mapped);
    encode(result >= 0 && result <= 0x10FFFF && !(result >= 0xD800 && result <= 0xDFFF) ? result : cp, out);
    i += length;
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
