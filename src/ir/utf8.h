// UTF-8, strictly (RFC 3629: no overlong forms, no UTF-16 surrogates, nothing
// above U+10FFFF): the one decoder and encoder that reports, the native text
// kernels and the CLI's .npy strings share. Header-only, so that the CLI,
// which links only the C API, uses the same code.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera {

/// Decodes the code point at `pos` and moves `pos` past it; false, with `pos`
/// and `cp` unchanged, where the bytes there are not UTF-8 (or `pos` is at the end).
inline bool next_code_point(std::string_view s, size_t& pos, uint32_t& cp) {
  if (pos >= s.size()) return false;
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
  const unsigned char lead = byte(pos);
  if (lead < 0x80) {
    cp = lead;
    ++pos;
    return true;
  }
  size_t length = 0;
  uint32_t value = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    value = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    value = lead & 0x0F;
    if (lead == 0xE0) low = 0xA0;   // overlong
    if (lead == 0xED) high = 0x9F;  // surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    value = lead & 0x07;
    if (lead == 0xF0) low = 0x90;   // overlong
    if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return false;
  }
  if (s.size() - pos < length) return false;
  for (size_t i = 1; i < length; ++i) {
    const unsigned char c = byte(pos + i);
    if (c < (i == 1 ? low : 0x80) || c > (i == 1 ? high : 0xBF)) return false;
    value = (value << 6) | (c & 0x3F);
  }
  cp = value;
  pos += length;
  return true;
}

/// Appends code point `cp` (at most U+10FFFF, not a surrogate) as UTF-8.
inline void append_utf8(std::string& out, uint32_t cp) {
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

inline bool is_valid_utf8(std::string_view text) {
  uint32_t cp = 0;
  for (size_t pos = 0; pos < text.size();) {
    if (!next_code_point(text, pos, cp)) return false;
  }
  return true;
}

}  // namespace tessera
