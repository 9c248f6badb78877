// Datatype table and error mappings of serve_types.h.
#include "serve_types.h"

#include <tessera/tessera.h>

#include <cstring>

namespace tessera::serve {

void invalid_argument(const std::string& message) { throw ServeError(ErrorKind::kInvalidArgument, message); }

int http_status_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return 400;
    case ErrorKind::kNotFound: return 404;
    case ErrorKind::kUnavailable: return 503;
    case ErrorKind::kTimeout: return 503;
    case ErrorKind::kUnsupported: return 501;
    case ErrorKind::kInternal: return 500;
    case ErrorKind::kCancelled: return 400;
  }
  return 500;
}

int grpc_code_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return 3;  // INVALID_ARGUMENT
    case ErrorKind::kNotFound: return 5;         // NOT_FOUND
    case ErrorKind::kUnavailable: return 14;     // UNAVAILABLE
    case ErrorKind::kTimeout: return 4;          // DEADLINE_EXCEEDED
    case ErrorKind::kUnsupported: return 12;     // UNIMPLEMENTED
    case ErrorKind::kInternal: return 13;        // INTERNAL
    case ErrorKind::kCancelled: return 1;        // CANCELLED
  }
  return 13;
}

const char* failure_reason_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kUnavailable:
    case ErrorKind::kTimeout: return "REJECTED";
    case ErrorKind::kCancelled: return "CANCELED";
    case ErrorKind::kInternal: return "BACKEND";
    default: return "OTHER";
  }
}

const std::vector<DataType>& data_types() {
  static const std::vector<DataType> kTypes = {
      {"BOOL", {TSR_DL_BOOL_CODE, 8, 1}, 1},   {"UINT8", {kDLUInt, 8, 1}, 1},     {"UINT16", {kDLUInt, 16, 1}, 2},
      {"UINT32", {kDLUInt, 32, 1}, 4},         {"UINT64", {kDLUInt, 64, 1}, 8},   {"INT8", {kDLInt, 8, 1}, 1},
      {"INT16", {kDLInt, 16, 1}, 2},           {"INT32", {kDLInt, 32, 1}, 4},     {"INT64", {kDLInt, 64, 1}, 8},
      {"FP16", {kDLFloat, 16, 1}, 2},          {"FP32", {kDLFloat, 32, 1}, 4},    {"FP64", {kDLFloat, 64, 1}, 8},
      {"BF16", {kDLBfloat, 16, 1}, 2},         {"BYTES", {TSR_DL_STRING_CODE, 8, 1}, 0},
  };
  return kTypes;
}

const DataType* data_type_named(const std::string& name) {
  for (const DataType& t : data_types())
    if (name == t.name) return &t;
  return nullptr;
}

const DataType* data_type_of(DLDataType dl) {
  for (const DataType& t : data_types())
    if (t.dl.code == dl.code && t.dl.bits == dl.bits && t.dl.lanes == dl.lanes) return &t;
  return nullptr;
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

void own_bytes(Tensor& tensor, std::string bytes) {
  auto owned = std::make_shared<std::string>(std::move(bytes));
  tensor.data = owned->data();
  tensor.bytes = owned->size();
  tensor.storage = owned;
}

/// Bytes of a tensor of `shape` filled as a warm-up asks: zeros, or random values
/// (floats in [0, 1), integers 0 or 1, so that an index input stays in range).
std::vector<std::string> split_bytes_elements(const char* data, size_t size, const std::string& input) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < size) {
    if (size - at < 4) throw ServeError(ErrorKind::kInvalidArgument, "input '" + input + "': a BYTES element's 4-byte length is cut off");
    uint32_t length;
    std::memcpy(&length, data + at, 4);
    at += 4;
    if (length > size - at) throw ServeError(ErrorKind::kInvalidArgument, "input '" + input + "': a BYTES element runs past its data");
    out.emplace_back(data + at, length);
    at += length;
  }
  return out;
}

std::string join_bytes_elements(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& s : elements) {
    const uint32_t length = static_cast<uint32_t>(s.size());
    out.append(reinterpret_cast<const char*>(&length), 4);
    out.append(s);
  }
  return out;
}

Tensor filled_tensor(const std::string& name, const DataType* type, const std::vector<int64_t>& shape, bool random,
                     std::mt19937& rng) {
  Tensor t;
  t.name = name;
  t.type = type;
  t.shape = shape;
  const int64_t n = element_count(shape);
  if (type->element_bytes == 0) {
    t.strings.assign(static_cast<size_t>(n), random ? "warm-up" : "");
    return t;
  }
  std::string bytes(static_cast<size_t>(n) * type->element_bytes, '\0');
  if (random) {
    std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
    for (int64_t i = 0; i < n; ++i) {
      char* p = bytes.data() + i * type->element_bytes;
      if (type->dl.code == kDLFloat && type->dl.bits == 32) {
        const float v = uniform(rng);
        std::memcpy(p, &v, 4);
      } else if (type->dl.code == kDLFloat && type->dl.bits == 64) {
        const double v = uniform(rng);
        std::memcpy(p, &v, 8);
      } else if (type->dl.code == kDLFloat || type->dl.code == kDLBfloat) {
        // 16-bit floats: a value in [0.5, 1) keeps the same bits' meaning small and finite in both.
        const uint16_t v = type->dl.code == kDLBfloat ? 0x3F00 | (rng() & 0x7F) : 0x3800 | (rng() & 0x3FF);
        std::memcpy(p, &v, 2);
      } else {
        p[0] = static_cast<char>(rng() & 1);  // little-endian: the low byte
      }
    }
  }
  own_bytes(t, std::move(bytes));
  return t;
}

}  // namespace tessera::serve
