// .npy reading and writing: the fixed prefix (magic, version, header length),
// a strict parser for the header's Python dict, the data checks, and numpy's
// fixed-width UTF-32 string arrays ('<U{n}') to and from UTF-8.
#include "npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string_view>

#include "ir/utf8.h"

namespace tessera::tools {
using tessera::append_utf8;
using tessera::next_code_point;
namespace {

struct DescrEntry {
  const char* descr;
  DLDataType dtype;
};

const DescrEntry kDescrs[] = {
    {"<f4", {kDLFloat, 32, 1}}, {"<f8", {kDLFloat, 64, 1}}, {"<f2", {kDLFloat, 16, 1}}, {"|i1", {kDLInt, 8, 1}},
    {"<i2", {kDLInt, 16, 1}},   {"<i4", {kDLInt, 32, 1}},   {"<i8", {kDLInt, 64, 1}},   {"|u1", {kDLUInt, 8, 1}},
    {"<u2", {kDLUInt, 16, 1}},  {"<u4", {kDLUInt, 32, 1}},  {"<u8", {kDLUInt, 64, 1}},  {"|b1", {TSR_DL_BOOL_CODE, 8, 1}},
};

/// numpy itself refuses headers over 10,000 bytes unless told otherwise.
constexpr size_t kMaxHeaderBytes = 65536;
/// Larger arrays are not plausible inputs; the cap keeps the size arithmetic far from overflow.
constexpr uint64_t kMaxDataBytes = uint64_t{1} << 40;
/// Widest string dtype read: '<U{n}' with 4 * n bytes per element within kMaxDataBytes.
constexpr uint64_t kMaxStringChars = kMaxDataBytes / 4;

bool same(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }

[[noreturn]] void fail(const std::string& path, const std::string& why) { throw std::runtime_error(path + ": " + why); }

/// What the fixed prefix says: where the header starts and how long it is.
struct Prefix {
  size_t header_start = 0;
  size_t header_len = 0;
};

/// Reads the prefix from `bytes`, which holds at least its first 10 bytes (12 for versions 2 and 3).
/// Returns the prefix's length once known: 10, or 12 (the caller then passes 12 bytes).
size_t prefix_length(std::string_view bytes, const std::string& path) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) fail(path, "not a .npy file");
  const int major = static_cast<unsigned char>(bytes[6]), minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    fail(path, "unsupported npy format version " + std::to_string(major) + "." + std::to_string(minor));
  }
  return major == 1 ? 10 : 12;
}

Prefix parse_prefix(std::string_view bytes, const std::string& path) {
  Prefix prefix;
  prefix.header_start = prefix_length(bytes, path);
  if (bytes.size() < prefix.header_start) fail(path, "truncated npy header");
  for (size_t i = 8; i < prefix.header_start; ++i) {
    prefix.header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[i])) << (8 * (i - 8));
  }
  if (prefix.header_len > kMaxHeaderBytes) {
    fail(path, "npy header of " + std::to_string(prefix.header_len) + " bytes is longer than the " +
                   std::to_string(kMaxHeaderBytes) + "-byte limit");
  }
  return prefix;
}

/// What the header dict says.
struct Header {
  DLDataType dtype{};
  std::vector<int64_t> shape;
  size_t data_bytes = 0;
  size_t elements = 0;
  // A string dtype, '<U{chars}' or (big_endian) '>U{chars}': 4 * chars bytes per element.
  bool is_string = false;
  bool big_endian = false;
  size_t chars = 0;
};

/// "element 7", and for two or more dimensions "element 7 (index [1, 3])".
std::string element_text(const std::vector<int64_t>& shape, uint64_t flat) {
  std::string text = "element " + std::to_string(flat);
  if (shape.size() < 2) return text;
  std::vector<uint64_t> index(shape.size());
  uint64_t rest = flat;
  for (size_t i = shape.size(); i-- > 0;) {
    const uint64_t size = static_cast<uint64_t>(shape[i]);
    index[i] = size ? rest % size : 0;
    rest = size ? rest / size : 0;
  }
  text += " (index [";
  for (size_t i = 0; i < index.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(index[i]);
  }
  return text + "])";
}

std::string code_point_text(uint32_t cp) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, cp > 0x10FFFF ? "0x%X" : "U+%04X", static_cast<unsigned>(cp));
  return buffer;
}


/// A recursive-descent reader of the header's one-line Python dict literal.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : text_(text), path_(path) {}

  Header parse() {
    bool have_descr = false, have_order = false, have_shape = false;
    std::string descr;
    Header header;
    skip_spaces();
    expect('{');
    for (;;) {
      skip_spaces();
      if (peek() == '}') break;
      const std::string key = quoted_string("a key");
      skip_spaces();
      expect(':');
      skip_spaces();
      if (key == "descr") {
        if (have_descr) malformed("'descr' is given twice");
        have_descr = true;
        if (peek() != '\'' && peek() != '"') malformed("'descr' is not a string (structured dtypes are not supported)");
        descr = quoted_string("'descr'");
      } else if (key == "fortran_order") {
        if (have_order) malformed("'fortran_order' is given twice");
        have_order = true;
        const std::string word = identifier();
        if (word == "True") fail(path_, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
        if (word != "False") malformed("'fortran_order' is '" + word + "', not True or False");
      } else if (key == "shape") {
        if (have_shape) malformed("'shape' is given twice");
        have_shape = true;
        header.shape = shape_tuple();
      } else {
        malformed("unknown key '" + key + "' (a .npy header has 'descr', 'fortran_order' and 'shape')");
      }
      skip_spaces();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') malformed("expected ',' or '}' after the value of '" + key + "'");
    }
    ++pos_;
    while (pos_ < text_.size()) {  // padding: spaces, ending with a newline
      if (text_[pos_] != ' ' && text_[pos_] != '\n' && text_[pos_] != '\t' && text_[pos_] != '\r') {
        malformed("unexpected text after the header dict");
      }
      ++pos_;
    }
    if (!have_descr || !have_order || !have_shape) malformed("the header needs 'descr', 'fortran_order' and 'shape'");
    if (!string_dtype(descr, header)) header.dtype = dtype_of(descr);
    const uint64_t item_bytes = header.is_string ? 4 * uint64_t{header.chars} : (header.dtype.bits + 7) / 8;
    // The element count, and the product of the nonzero sizes, stay within the cap too: a zero size
    // makes the array empty, but the other sizes must still be sizes that can be multiplied.
    uint64_t elements = 1, nonzero = 1;
    for (int64_t d : header.shape) {
      const uint64_t size = static_cast<uint64_t>(d);
      if (size > 0 && nonzero > kMaxDataBytes / size) fail(path_, "npy shape is too large");
      if (size > 0) nonzero *= size;
      elements *= size;
    }
    if (elements > 0 && item_bytes > kMaxDataBytes / elements) fail(path_, "npy shape is too large");
    header.elements = static_cast<size_t>(elements);
    header.data_bytes = static_cast<size_t>(elements * item_bytes);
    return header;
  }

 private:
  [[noreturn]] void malformed(const std::string& why) { fail(path_, "malformed npy header: " + why); }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_spaces() {
    while (peek() == ' ') ++pos_;
  }
  void expect(char c) {
    if (peek() != c) malformed(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string quoted_string(const char* what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') malformed(std::string("expected a quoted string for ") + what);
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) malformed("unterminated string");
    std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
    if (value.find('\\') != std::string::npos) malformed("escapes in strings are not supported");
    pos_ = end + 1;
    return value;
  }
  std::string identifier() {
    const size_t start = pos_;
    while ((peek() >= 'A' && peek() <= 'Z') || (peek() >= 'a' && peek() <= 'z')) ++pos_;
    return std::string(text_.substr(start, pos_ - start));
  }
  /// "()", "(3,)", "(2, 3)" or "(2, 3,)": sizes in decimal. "(3)" is not a tuple in Python.
  std::vector<int64_t> shape_tuple() {
    expect('(');
    std::vector<int64_t> shape;
    bool trailing_comma = false;
    for (;;) {
      skip_spaces();
      if (peek() == ')') break;
      const size_t start = pos_;
      while (peek() >= '0' && peek() <= '9') ++pos_;
      const std::string digits(text_.substr(start, pos_ - start));
      if (digits.empty()) malformed("'shape' must be a tuple of non-negative integers");
      if (digits.size() > 18) fail(path_, "npy shape is too large");
      shape.push_back(std::stoll(digits));
      skip_spaces();
      trailing_comma = peek() == ',';
      if (trailing_comma) {
        ++pos_;
      } else if (peek() != ')') {
        malformed("'shape' must be a tuple of non-negative integers");
      }
    }
    ++pos_;
    if (shape.size() == 1 && !trailing_comma) malformed("'shape' is not a tuple (one dimension is written (N,))");
    return shape;
  }
  /// '<U{n}' and '>U{n}': true, with `header` set; false for every other descr.
  bool string_dtype(const std::string& descr, Header& header) const {
    if (descr.size() < 2 || descr[1] != 'U') return false;
    const std::string digits = descr.substr(2);
    if ((descr[0] != '<' && descr[0] != '>') || digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
      fail(path_, "unsupported npy dtype '" + descr + "' (numpy writes strings as '<U' and the number of characters)");
    }
    const std::string significant = digits.substr(std::min(digits.find_first_not_of('0'), digits.size()));
    const uint64_t chars = significant.size() > 12 ? kMaxStringChars + 1 : std::stoull("0" + significant);
    if (chars > kMaxStringChars) {
      fail(path_, "npy string dtype '" + descr + "' is too wide (at most " + std::to_string(kMaxStringChars) +
                      " characters per element)");
    }
    if (chars == 0) fail(path_, "npy string dtype '" + descr + "' has no room for characters (numpy writes at least '<U1')");
    header.is_string = true;
    header.big_endian = descr[0] == '>';
    header.chars = static_cast<size_t>(chars);
    header.dtype = kNpyStringDtype;
    return true;
  }
  DLDataType dtype_of(std::string descr) const {
    if (descr.size() >= 2 && descr[1] == 'O') {
      fail(path_, "npy dtype '" + descr + "' is a numpy object array (pickled Python objects), which cannot be read; "
                  "for strings save with dtype str, e.g. np.save(path, np.array(values, dtype=str))");
    }
    if (descr.size() >= 2 && descr[1] == 'S') {
      fail(path_, "npy dtype '" + descr + "' holds byte strings, which are not supported; save text with dtype str, "
                  "e.g. np.save(path, np.array(values, dtype=str))");
    }
    if (descr.size() >= 2 && descr[0] == '>' && descr.substr(2) != "1") {
      fail(path_, "big-endian npy dtype '" + descr + "' is not supported; save with arr.astype(arr.dtype.newbyteorder('<'))");
    }
    if (descr.size() == 3 && descr[2] == '1' && (descr[0] == '<' || descr[0] == '>' || descr[0] == '=')) descr[0] = '|';
    for (const DescrEntry& e : kDescrs) {
      if (descr == e.descr) return e.dtype;
    }
    fail(path_, "unsupported npy dtype '" + descr + "'");
  }

  std::string_view text_;
  const std::string& path_;
  size_t pos_ = 0;
};

/// Closes a descriptor on every path out.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

/// Reads up to `size` bytes into `out` (appending); returns how many arrived before the end of the file.
size_t read_up_to(int fd, std::string& out, size_t size, const std::string& path) {
  size_t done = 0;
  char chunk[65536];
  while (done < size) {
    ssize_t n = ::read(fd, chunk, std::min(sizeof(chunk), size - done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      fail(path, std::string("cannot read: ") + std::strerror(error));
    }
    if (n == 0) break;
    out.append(chunk, static_cast<size_t>(n));
    done += static_cast<size_t>(n);
  }
  return done;
}

[[noreturn]] void wrong_data_length(const std::string& path, uint64_t have, size_t need) {
  if (have < need) fail(path, "truncated npy data: " + std::to_string(have) + " bytes, the shape needs " + std::to_string(need));
  fail(path, "npy data is longer than its shape needs (" + std::to_string(need) + " bytes, then " +
                 std::to_string(have - need) + " more)");
}

/// The strings of a '<U{n}' or '>U{n}' array whose data is exactly elements * 4 * chars bytes.
NpyArray string_array_of(const Header& header, std::string_view data, const std::string& path) {
  NpyArray array;
  array.is_string = true;
  array.dtype = kNpyStringDtype;
  array.shape = header.shape;
  array.strings.reserve(header.elements);
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  const auto unit = [&](size_t i) -> uint32_t {
    const unsigned char* p = bytes + 4 * i;
    return header.big_endian ? uint32_t{p[3]} | uint32_t{p[2]} << 8 | uint32_t{p[1]} << 16 | uint32_t{p[0]} << 24
                             : uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  };
  for (size_t e = 0; e < header.elements; ++e) {
    const size_t first = e * header.chars;
    size_t length = header.chars;
    while (length > 0 && unit(first + length - 1) == 0) --length;  // numpy's padding is not part of the string
    std::string text;
    text.reserve(length);
    for (size_t i = 0; i < length; ++i) {
      const uint32_t cp = unit(first + i);
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
        fail(path, "npy string " + element_text(header.shape, e) + " holds " + code_point_text(cp) + " at character " +
                       std::to_string(i) + ", which is not a Unicode character (" +
                       (cp > 0x10FFFF ? "above U+10FFFF" : "a surrogate") + ")");
      }
      append_utf8(text, cp);
    }
    array.strings.push_back(std::move(text));
  }
  return array;
}

NpyArray array_of(const Header& header, std::string_view data, const std::string& path) {
  if (header.is_string) return string_array_of(header, data, path);
  if (same(header.dtype, DLDataType{TSR_DL_BOOL_CODE, 8, 1})) {
    for (char c : data) {
      if (c != 0 && c != 1) fail(path, "npy bool data holds a byte that is neither 0 nor 1");
    }
  }
  NpyArray array;
  array.dtype = header.dtype;
  array.shape = header.shape;
  array.data.assign(data.begin(), data.end());
  return array;
}

}  // namespace

size_t dl_dtype_size(DLDataType dtype) { return static_cast<size_t>((dtype.bits + 7) / 8) * dtype.lanes; }

std::string dl_dtype_name(DLDataType dtype) {
  if (same(dtype, kNpyStringDtype)) return "str";
  switch (dtype.code) {
    case kDLFloat: return "float" + std::to_string(dtype.bits);
    case kDLInt: return "int" + std::to_string(dtype.bits);
    case kDLUInt: return "uint" + std::to_string(dtype.bits);
    case TSR_DL_BOOL_CODE: return "bool";
    case kDLBfloat: return "bfloat16";
    default: return "unknown";
  }
}

NpyArray read_npy(const std::string& path) {
  FileDescriptor file;
  file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file.fd < 0) {
    const int error = errno;
    fail(path, std::string("cannot open: ") + std::strerror(error));
  }
  struct stat info {};
  if (::fstat(file.fd, &info) != 0) fail(path, "cannot read");
  if (S_ISDIR(info.st_mode)) fail(path, "is a directory, not a .npy file");
  // Read piece by piece, so that a pipe (or a huge file) is never read further than the header says.
  std::string bytes;
  read_up_to(file.fd, bytes, 10, path);
  const size_t prefix_bytes = prefix_length(bytes, path);
  read_up_to(file.fd, bytes, prefix_bytes - bytes.size(), path);
  const Prefix prefix = parse_prefix(bytes, path);
  if (read_up_to(file.fd, bytes, prefix.header_len, path) < prefix.header_len) fail(path, "truncated npy header");
  const Header header = HeaderParser(std::string_view(bytes).substr(prefix.header_start), path).parse();
  const size_t data_start = bytes.size();
  if (S_ISREG(info.st_mode) && static_cast<uint64_t>(info.st_size) != data_start + header.data_bytes) {
    wrong_data_length(path, static_cast<uint64_t>(info.st_size) - data_start, header.data_bytes);
  }
  const size_t got = read_up_to(file.fd, bytes, header.data_bytes, path);
  if (got < header.data_bytes) wrong_data_length(path, got, header.data_bytes);
  std::string extra;
  if (read_up_to(file.fd, extra, 1, path) != 0) fail(path, "npy data is longer than its shape needs");
  return array_of(header, std::string_view(bytes).substr(data_start), path);
}

NpyArray parse_npy(const std::string& bytes, const std::string& path) {
  const Prefix prefix = parse_prefix(bytes, path);
  if (bytes.size() - prefix.header_start < prefix.header_len) fail(path, "truncated npy header");
  const Header header = HeaderParser(std::string_view(bytes).substr(prefix.header_start, prefix.header_len), path).parse();
  const size_t data_start = prefix.header_start + prefix.header_len;
  if (bytes.size() - data_start != header.data_bytes) wrong_data_length(path, bytes.size() - data_start, header.data_bytes);
  return array_of(header, std::string_view(bytes).substr(data_start), path);
}

namespace {

/// The prefix and header of a version-1 .npy file, padded as numpy pads it (data starts at a multiple of 64).
std::string npy_header(const std::string& descr, const std::vector<int64_t>& shape_sizes, const std::string& path) {
  std::string shape = "(";
  for (size_t i = 0; i < shape_sizes.size(); ++i) shape += std::to_string(shape_sizes[i]) + (shape_sizes.size() == 1 || i + 1 < shape_sizes.size() ? "," : "");
  shape += ")";
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 65535) fail(path, "npy header too long");
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  return bytes;
}

/// The number of elements `shape` holds; throws (with `path`) for negative sizes or a count over the cap.
uint64_t element_count(const std::vector<int64_t>& shape, const std::string& path) {
  uint64_t elements = 1, nonzero = 1;
  for (int64_t d : shape) {
    if (d < 0) fail(path, "a string array's shape has a negative size (" + std::to_string(d) + ")");
    const uint64_t size = static_cast<uint64_t>(d);
    if (size > 0 && nonzero > kMaxDataBytes / size) fail(path, "a string array's shape is too large");
    if (size > 0) nonzero *= size;
    elements *= size;
  }
  return elements;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  if (shape.empty()) return "()";
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += 'x';
    text += std::to_string(shape[i]);
  }
  return text;
}

/// '<U{m}', m the most code points of any element (at least 1), each element padded with NULs.
std::string encode_string_npy(const NpyArray& array, const std::string& path) {
  const uint64_t elements = element_count(array.shape, path);
  if (elements != array.strings.size()) {
    fail(path, "a string array of shape " + shape_text(array.shape) + " needs " + std::to_string(elements) +
                   " strings, it holds " + std::to_string(array.strings.size()));
  }
  // First pass: check the UTF-8 and find the width.
  uint64_t width = 1;
  for (size_t e = 0; e < array.strings.size(); ++e) {
    const std::string_view text = array.strings[e];
    uint64_t count = 0;
    uint32_t cp = 0;
    for (size_t pos = 0; pos < text.size(); ++count) {
      if (!next_code_point(text, pos, cp)) {
        if (array.escape_invalid_utf8) {
          ++pos;  // one escaped byte, one code point
          continue;
        }
        fail(path, "string " + element_text(array.shape, e) + " is not valid UTF-8 (at byte " + std::to_string(pos) + ")");
      }
    }
    width = std::max(width, count);
  }
  if (elements > 0 && width > kMaxDataBytes / 4 / elements) {
    fail(path, "a string array of " + std::to_string(elements) + " elements, the longest " + std::to_string(width) +
                   " characters, is too large to write as npy (numpy pads every element to the longest)");
  }
  std::string bytes = npy_header("<U" + std::to_string(width), array.shape, path);
  const size_t start = bytes.size();
  bytes.resize(start + static_cast<size_t>(elements * width * 4), '\0');
  for (size_t e = 0; e < array.strings.size(); ++e) {
    const std::string_view text = array.strings[e];
    char* out = bytes.data() + start + e * width * 4;
    uint32_t cp = 0;
    for (size_t pos = 0; pos < text.size(); out += 4) {
      if (!next_code_point(text, pos, cp)) cp = 0xDC00u + static_cast<unsigned char>(text[pos++]);  // escaped (above)
      out[0] = static_cast<char>(cp & 0xFF);
      out[1] = static_cast<char>((cp >> 8) & 0xFF);
      out[2] = static_cast<char>((cp >> 16) & 0xFF);
      out[3] = static_cast<char>(cp >> 24);
    }
  }
  return bytes;
}

}  // namespace


NpyArray make_string_array(std::vector<int64_t> shape, std::vector<std::string> strings) {
  const std::string what = "make_string_array";
  const uint64_t elements = element_count(shape, what);
  if (elements != strings.size()) {
    fail(what, "shape " + shape_text(shape) + " holds " + std::to_string(elements) + " elements, " +
                   std::to_string(strings.size()) + " strings given");
  }
  NpyArray array;
  array.is_string = true;
  array.dtype = kNpyStringDtype;
  array.shape = std::move(shape);
  array.strings = std::move(strings);
  return array;
}

std::string encode_npy(const NpyArray& array, const std::string& path) {
  if (array.is_string) return encode_string_npy(array, path);
  const char* descr = nullptr;
  for (const DescrEntry& e : kDescrs) {
    if (same(e.dtype, array.dtype)) descr = e.descr;
  }
  if (!descr) fail(path, "cannot write dtype " + dl_dtype_name(array.dtype) + " to npy");
  std::string bytes = npy_header(descr, array.shape, path);
  bytes.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  return bytes;
}

bool is_bfloat16(DLDataType dtype) { return dtype.code == kDLBfloat && dtype.bits == 16 && dtype.lanes == 1; }

uint16_t float_to_bfloat16_bits(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // NaN: keep the sign, make it quiet
  }
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest, ties to even (overflow goes to infinity)
  return static_cast<uint16_t>(bits >> 16);
}

float bfloat16_bits_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value = 0;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

NpyArray to_bfloat16(const NpyArray& array, const std::string& name) {
  NpyArray out;
  out.dtype = DLDataType{kDLBfloat, 16, 1};
  out.shape = array.shape;
  const size_t n = array.data.size() / std::max<size_t>(1, dl_dtype_size(array.dtype));
  out.data.resize(n * 2);
  auto* dst = reinterpret_cast<uint16_t*>(out.data.data());
  if (array.dtype.code == kDLFloat && array.dtype.bits == 32 && array.dtype.lanes == 1) {
    for (size_t i = 0; i < n; ++i) {
      float v = 0;
      std::memcpy(&v, array.data.data() + i * 4, 4);
      dst[i] = float_to_bfloat16_bits(v);
    }
  } else if (array.dtype.code == kDLUInt && array.dtype.bits == 16 && array.dtype.lanes == 1) {
    std::memcpy(dst, array.data.data(), n * 2);
  } else {
    throw std::runtime_error(name + ": holds " + dl_dtype_name(array.dtype) +
                             "; a bfloat16 input reads float32 (rounded to bfloat16) or uint16 (bit patterns)");
  }
  return out;
}

NpyArray from_bfloat16(const NpyArray& array, bool bits) {
  NpyArray out;
  out.shape = array.shape;
  const size_t n = array.data.size() / 2;
  if (bits) {
    out.dtype = DLDataType{kDLUInt, 16, 1};
    out.data = array.data;
    return out;
  }
  out.dtype = DLDataType{kDLFloat, 32, 1};
  out.data.resize(n * 4);
  for (size_t i = 0; i < n; ++i) {
    uint16_t b = 0;
    std::memcpy(&b, array.data.data() + i * 2, 2);
    const float v = bfloat16_bits_to_float(b);
    std::memcpy(out.data.data() + i * 4, &v, 4);
  }
  return out;
}

}  // namespace tessera::tools
