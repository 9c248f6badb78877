// Cast and CastLike to and from string tensors (see elementwise_internal.h).
#include <charconv>
#include <string>
#include <system_error>

#include "backends/native/kernels/elementwise_internal.h"

namespace tessera::native::elementwise {
namespace {

bool equals_ignoring_case(const std::string& a, const char* b) {
  size_t i = 0;
  for (; i < a.size() && b[i]; ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    char d = b[i];
    if (d >= 'A' && d <= 'Z') d = static_cast<char>(d - 'A' + 'a');
    if (c != d) return false;
  }
  return i == a.size() && !b[i];
}

/// The number a string spells, or fails naming the node, the element and the text.
double parse_number(const KernelContext& ctx, const std::string& text, int64_t index) {
  if (equals_ignoring_case(text, "nan")) return std::numeric_limits<double>::quiet_NaN();
  if (equals_ignoring_case(text, "inf") || equals_ignoring_case(text, "+inf")) return std::numeric_limits<double>::infinity();
  if (equals_ignoring_case(text, "-inf")) return -std::numeric_limits<double>::infinity();
  const char* begin = text.data();
  const char* end = begin + text.size();
  if (begin != end && *begin == '+') ++begin;
  double value = 0;
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || begin == end) {
    std::string shown = text.size() > 64 ? text.substr(0, 64) + "..." : text;
    ctx.fail("element ", index, " is the string \"", shown, "\", which is not a number");
  }
  return value;
}

/// Integers parse exactly (int64 range); other text as a number, truncated toward zero.
template <typename Out>
Out parse_as(const KernelContext& ctx, const std::string& text, int64_t index) {
  if constexpr (std::is_integral_v<Out>) {
    int64_t exact = 0;
    const char* begin = text.data() + (!text.empty() && text[0] == '+' ? 1 : 0);
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(begin, end, exact);
    if (ec == std::errc() && ptr == end && begin != end) return static_cast<Out>(exact);
  }
  const double value = parse_number(ctx, text, index);
  if constexpr (std::is_same_v<Out, bool>) {
    return value != 0;
  } else if constexpr (std::is_integral_v<Out>) {
    return float_to_integer<Out>(value);
  } else {
    return store<Out>(static_cast<Compute<Out>>(value));
  }
}

template <typename T>
std::string shortest_text(T value) {
  char buffer[64];
  const auto [ptr, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return ec == std::errc() ? std::string(buffer, ptr) : std::string();
}

template <typename In>
std::string to_text(In value) {
  if constexpr (std::is_same_v<In, bool>) {
    return value ? "1" : "0";
  } else if constexpr (std::is_integral_v<In>) {
    return std::to_string(value);
  } else {
    const auto v = load(value);  // float for float16 / bfloat16
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
    return shortest_text(v);
  }
}

}  // namespace

void cast_strings(const KernelContext& ctx, const TensorView& x, const TensorView& y) {
  const int64_t n = x.numel();
  if (x.dtype == DType::kString) {
    const auto* in = x.as<std::string>();
    dispatch_all(y.dtype, [&](auto tag) {
      using Out = decltype(tag);
      Out* out = y.as<Out>();
      for (int64_t i = 0; i < n; ++i) out[i] = parse_as<Out>(ctx, in[i], i);
    });
    return;
  }
  if (y.dtype != DType::kString) throw_internal_error("cast_strings: neither side is a string tensor");
  auto* out = y.as<std::string>();
  dispatch_all(x.dtype, [&](auto tag) {
    using In = decltype(tag);
    const In* in = x.as<In>();
    for (int64_t i = 0; i < n; ++i) out[i] = to_text(in[i]);
  });
}

}  // namespace tessera::native::elementwise
