// Contract in raw_data_spans.h. The field numbers are onnx.proto's:
// ModelProto.graph = 7, GraphProto.initializer = 5, TensorProto.raw_data = 9.
#include "frontend/onnx/raw_data_spans.h"

#include <cstdint>

namespace tessera::onnx_frontend {
namespace {

constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kTensorRawData = 9;

enum WireType : uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

bool read_varint(const char*& p, const char* end, uint64_t* value) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p == end) return false;
    const auto byte = static_cast<uint8_t>(*p++);
    v |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if (!(byte & 0x80)) {
      *value = v;
      return true;
    }
  }
  return false;  // more than ten bytes
}

void write_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

/// One field of a message: its number, wire type, the bytes of the whole field (tag included) and,
/// for a length-delimited one, its payload.
struct Field {
  uint32_t number = 0;
  uint32_t wire = 0;
  std::string_view whole, payload;
};

/// Reads the field at p; false on malformed bytes or a wire type this walker does not copy (groups).
bool next_field(const char*& p, const char* end, Field* f) {
  const char* start = p;
  uint64_t tag = 0;
  if (!read_varint(p, end, &tag) || (tag >> 3) == 0 || (tag >> 3) > 0x1FFFFFFF) return false;
  f->number = static_cast<uint32_t>(tag >> 3);
  f->wire = static_cast<uint32_t>(tag & 7);
  uint64_t skip = 0;
  switch (f->wire) {
    case kVarint: {
      uint64_t ignored = 0;
      if (!read_varint(p, end, &ignored)) return false;
      break;
    }
    case kFixed64: skip = 8; break;
    case kFixed32: skip = 4; break;
    case kLengthDelimited:
      if (!read_varint(p, end, &skip)) return false;
      break;
    default: return false;
  }
  if (skip > static_cast<uint64_t>(end - p)) return false;
  if (f->wire == kLengthDelimited) f->payload = std::string_view(p, static_cast<size_t>(skip));
  p += skip;
  f->whole = std::string_view(start, static_cast<size_t>(p - start));
  return true;
}

void write_length_delimited(std::string& out, uint32_t number, const std::string& payload) {
  write_varint(out, (uint64_t{number} << 3) | kLengthDelimited);
  write_varint(out, payload.size());
  out += payload;
}

class Lifter {
 public:
  explicit Lifter(LiftedRawData* out) : out_(out) {}

  bool model(std::string_view bytes, std::string& stripped) { return rewrite(bytes, kModelGraph, &Lifter::graph, stripped); }

  size_t lifted() const { return lifted_; }

 private:
  using Rewriter = bool (Lifter::*)(std::string_view bytes, std::string& stripped);

  /// Copies a message's fields to `stripped`, each length-delimited field `number` rewritten by `nested`.
  bool rewrite(std::string_view bytes, uint32_t number, Rewriter nested, std::string& stripped) {
    const char *p = bytes.data(), *end = p + bytes.size();
    Field f;
    while (p < end) {
      if (!next_field(p, end, &f)) return false;
      if (f.number == number && f.wire == kLengthDelimited) {
        std::string rewritten;
        if (!(this->*nested)(f.payload, rewritten)) return false;
        write_length_delimited(stripped, number, rewritten);
      } else {
        stripped.append(f.whole);
      }
    }
    return true;
  }

  bool graph(std::string_view bytes, std::string& stripped) {
    return rewrite(bytes, kGraphInitializer, &Lifter::tensor, stripped);
  }

  bool tensor(std::string_view bytes, std::string& stripped) {
    const char *p = bytes.data(), *end = p + bytes.size();
    std::string_view raw;
    bool had = false;
    Field f;
    while (p < end) {
      if (!next_field(p, end, &f)) return false;
      if (f.number == kTensorRawData && f.wire == kLengthDelimited) {
        raw = f.payload;  // protobuf keeps the last of a repeated singular field
        had = true;
        ++lifted_;
      } else {
        stripped.append(f.whole);
      }
    }
    out_->raw_data.push_back(had ? raw : std::string_view());
    out_->had_raw_data.push_back(had);
    return true;
  }

  LiftedRawData* out_;
  size_t lifted_ = 0;
};

}  // namespace

bool lift_initializer_raw_data(const char* data, size_t size, LiftedRawData* out) {
  LiftedRawData result;
  Lifter lifter(&result);
  if (!lifter.model(std::string_view(data, size), result.stripped) || lifter.lifted() == 0) return false;
  *out = std::move(result);
  return true;
}

}  // namespace tessera::onnx_frontend
