// .npy reading and writing: the fixed prefix (magic, version, header length),
// a strict parser for the header's Python dict, and the data checks.
#include "npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace tessera::tools {
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
};

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
    header.dtype = dtype_of(descr);
    uint64_t bytes = (header.dtype.bits + 7) / 8;
    for (int64_t d : header.shape) {
      if (d > 0 && bytes > kMaxDataBytes / static_cast<uint64_t>(d)) fail(path_, "npy shape is too large");
      bytes *= static_cast<uint64_t>(d);
    }
    header.data_bytes = static_cast<size_t>(bytes);
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
  DLDataType dtype_of(std::string descr) const {
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

NpyArray array_of(const Header& header, std::string_view data, const std::string& path) {
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

std::string encode_npy(const NpyArray& array, const std::string& path) {
  const char* descr = nullptr;
  for (const DescrEntry& e : kDescrs) {
    if (same(e.dtype, array.dtype)) descr = e.descr;
  }
  if (!descr) fail(path, "cannot write dtype " + dl_dtype_name(array.dtype) + " to npy");
  std::string shape = "(";
  for (size_t i = 0; i < array.shape.size(); ++i) shape += std::to_string(array.shape[i]) + (array.shape.size() == 1 || i + 1 < array.shape.size() ? "," : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 65535) fail(path, "npy header too long");
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
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
