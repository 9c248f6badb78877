#include "npy.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

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

bool same(DLDataType a, DLDataType b) { return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes; }

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw std::runtime_error(path + ": " + why);
}

/// Value of `key` in the header dict, e.g. 'descr': '<f4' -> <f4.
std::string dict_value(const std::string& header, const std::string& key, const std::string& path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) fail(path, "npy header has no '" + key + "'");
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) fail(path, "malformed npy header");
  size_t start = header.find_first_not_of(' ', colon + 1);
  if (start == std::string::npos) fail(path, "malformed npy header");
  if (header[start] == '\'') {
    size_t end = header.find('\'', start + 1);
    if (end == std::string::npos) fail(path, "malformed npy header");
    return header.substr(start + 1, end - start - 1);
  }
  if (header[start] == '(') {
    size_t end = header.find(')', start);
    if (end == std::string::npos) fail(path, "malformed npy header");
    return header.substr(start + 1, end - start - 1);
  }
  size_t end = header.find_first_of(",}", start);
  return header.substr(start, end - start);
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
  std::ifstream file(path, std::ios::binary);
  if (!file) fail(path, "cannot open");
  std::ostringstream buffer;
  buffer << file.rdbuf();
  return parse_npy(buffer.str(), path);
}

NpyArray parse_npy(const std::string& bytes, const std::string& path) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) fail(path, "not a .npy file");
  int major = static_cast<unsigned char>(bytes[6]);
  size_t header_len, header_start;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) fail(path, "truncated npy header");
    header_len = 0;
    for (int i = 0; i < 4; ++i) header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    header_start = 12;
  } else {
    fail(path, "unsupported npy format version " + std::to_string(major));
  }
  if (header_start + header_len > bytes.size()) fail(path, "truncated npy header");
  std::string header = bytes.substr(header_start, header_len);
  std::string descr = dict_value(header, "descr", path);
  if (dict_value(header, "fortran_order", path).find("True") != std::string::npos) {
    fail(path, "Fortran-order arrays are not supported; save with np.ascontiguousarray");
  }
  NpyArray array;
  bool found = false;
  if (descr == "<b1") descr = "|b1";
  if (descr == "<i1") descr = "|i1";
  if (descr == "<u1") descr = "|u1";
  for (const DescrEntry& e : kDescrs) {
    if (descr == e.descr) {
      array.dtype = e.dtype;
      found = true;
    }
  }
  if (!found) fail(path, "unsupported npy dtype '" + descr + "'");
  std::string shape_text = dict_value(header, "shape", path);
  std::stringstream shape_stream(shape_text);
  std::string item;
  int64_t count = 1;
  while (std::getline(shape_stream, item, ',')) {
    size_t a = item.find_first_not_of(' ');
    if (a == std::string::npos) continue;
    try {
      int64_t d = std::stoll(item.substr(a));
      if (d < 0) fail(path, "negative dimension in npy shape");
      if (d > 0 && count > (int64_t{1} << 40) / d) fail(path, "npy shape is too large");
      array.shape.push_back(d);
      count *= d;
    } catch (const std::logic_error&) {
      fail(path, "malformed npy shape '" + shape_text + "'");
    }
  }
  size_t nbytes = static_cast<size_t>(count) * dl_dtype_size(array.dtype);
  size_t data_start = header_start + header_len;
  if (bytes.size() - data_start < nbytes) fail(path, "truncated npy data");
  array.data.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data_start),
                    bytes.begin() + static_cast<std::ptrdiff_t>(data_start + nbytes));
  return array;
}

void write_npy(const std::string& path, const NpyArray& array) {
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
  std::ofstream file(path, std::ios::binary);
  if (!file) fail(path, "cannot write");
  file.write("\x93NUMPY\x01\x00", 8);
  unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xff), static_cast<unsigned char>(header.size() >> 8)};
  file.write(reinterpret_cast<const char*>(len), 2);
  file << header;
  file.write(reinterpret_cast<const char*>(array.data.data()), static_cast<std::streamsize>(array.data.size()));
  if (!file) fail(path, "write failed");
}

}  // namespace tessera::tools
