// The test backend's payload: its program as bytes. Little-endian:
//
//   "TSTB" magic, u32 format version (1), u32 value count, u32 instruction count,
//   then per instruction:
//     u32 opcode, u32 node index,
//     u32 n, n × i32 input ids;  u32 n, n × i32 output ids;
//     u32 n, n × i64 ints;       u32 n, n × f32 floats (IEEE bits)
//   and nothing after the last instruction.
//
// Parsing trusts nothing: every count is bounded and every read checked
// against the end, so a hostile payload is a user error, never a crash.
// Whether the ids and ops fit the region graph is check_program_against's job.
#include <algorithm>
#include <bit>
#include <cstring>

#include "backends/testing/test_backend_internal.h"
#include "ir/error.h"

namespace tessera::test_backend {
namespace {

constexpr char kMagic[4] = {'T', 'S', 'T', 'B'};
constexpr uint32_t kFormatVersion = 1;
// Generous bounds that no real instruction reaches (Transpose of rank 64 at most).
constexpr uint32_t kMaxOperands = 16;
constexpr uint32_t kMaxInts = 64;
constexpr uint32_t kMaxFloats = 16;
constexpr uint32_t kMaxInstructions = 1u << 24;

class Writer {
 public:
  void bytes(const void* data, size_t size) {
    const uint8_t* p = static_cast<const uint8_t*>(data);
    out_.insert(out_.end(), p, p + size);
  }
  template <typename T>
  void scalar(T value) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    // Stored little-endian whatever the host's order.
    if constexpr (std::endian::native == std::endian::big) std::reverse(raw, raw + sizeof(T));
    bytes(raw, sizeof(T));
  }
  template <typename T>
  void list(const std::vector<T>& values) {
    scalar(static_cast<uint32_t>(values.size()));
    for (const T& v : values) scalar(v);
  }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> data) : data_(data) {}

  template <typename T>
  T scalar(const char* what) {
    if (data_.size() - position_ < sizeof(T)) {
      throw_user_error("test backend payload: truncated at byte ", position_, " while reading ", what, " (",
                       data_.size(), " bytes in all)");
    }
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, data_.data() + position_, sizeof(T));
    if constexpr (std::endian::native == std::endian::big) std::reverse(raw, raw + sizeof(T));
    position_ += sizeof(T);
    T value;
    std::memcpy(&value, raw, sizeof(T));
    return value;
  }

  template <typename T>
  std::vector<T> list(const char* what, uint32_t max_count, size_t instruction) {
    const uint32_t count = scalar<uint32_t>(what);
    if (count > max_count) {
      throw_user_error("test backend payload: instruction ", instruction, " has ", count, " ", what,
                       " (at most ", max_count, ")");
    }
    std::vector<T> values(count);
    for (T& v : values) v = scalar<T>(what);
    return values;
  }

  void expect_bytes(const char* expected, size_t size, const char* what) {
    if (data_.size() - position_ < size) {
      throw_user_error("test backend payload: truncated at byte ", position_, " while reading ", what);
    }
    if (std::memcmp(data_.data() + position_, expected, size) != 0) {
      throw_user_error("test backend payload: bad ", what, " (not a test backend payload)");
    }
    position_ += size;
  }

  size_t position() const { return position_; }
  size_t remaining() const { return data_.size() - position_; }

 private:
  std::span<const uint8_t> data_;
  size_t position_ = 0;
};

}  // namespace

const char* opcode_name(Opcode opcode) {
  switch (opcode) {
    case Opcode::kRelu: return "Relu";
    case Opcode::kSigmoid: return "Sigmoid";
    case Opcode::kTanh: return "Tanh";
    case Opcode::kNeg: return "Neg";
    case Opcode::kAbs: return "Abs";
    case Opcode::kExp: return "Exp";
    case Opcode::kAdd: return "Add";
    case Opcode::kSub: return "Sub";
    case Opcode::kMul: return "Mul";
    case Opcode::kDiv: return "Div";
    case Opcode::kMatMul: return "MatMul";
    case Opcode::kGemm: return "Gemm";
    case Opcode::kSoftmax: return "Softmax";
    case Opcode::kTranspose: return "Transpose";
    case Opcode::kCopy: return "Copy";
    case Opcode::kGelu: return "Gelu";
    case Opcode::kAddRelu: return "AddRelu";
    case Opcode::kMatMulBias: return "MatMulBias";
    case Opcode::kMatMulBiasRelu: return "MatMulBiasRelu";
    case Opcode::kMatMulBiasGelu: return "MatMulBiasGelu";
  }
  return "unknown";
}

std::vector<uint8_t> serialize_program(const Program& program) {
  Writer writer;
  writer.bytes(kMagic, sizeof kMagic);
  writer.scalar(kFormatVersion);
  writer.scalar(program.value_count);
  writer.scalar(static_cast<uint32_t>(program.instructions.size()));
  for (const Instruction& instruction : program.instructions) {
    writer.scalar(static_cast<uint32_t>(instruction.opcode));
    writer.scalar(instruction.node_index);
    writer.list(instruction.inputs);
    writer.list(instruction.outputs);
    writer.list(instruction.ints);
    writer.list(instruction.floats);
  }
  return writer.take();
}

Program parse_program(std::span<const uint8_t> payload) {
  Reader reader(payload);
  reader.expect_bytes(kMagic, sizeof kMagic, "magic");
  const uint32_t version = reader.scalar<uint32_t>("format version");
  if (version != kFormatVersion) {
    throw_user_error("test backend payload: format version ", version, "; this build reads version ",
                     kFormatVersion);
  }
  Program program;
  program.value_count = reader.scalar<uint32_t>("value count");
  const uint32_t count = reader.scalar<uint32_t>("instruction count");
  // Each instruction takes at least 24 bytes, so a count the rest cannot hold is refused before reserving.
  if (count > kMaxInstructions || count > reader.remaining() / 24) {
    throw_user_error("test backend payload: ", count, " instructions cannot fit in ", reader.remaining(),
                     " remaining bytes");
  }
  program.instructions.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    Instruction instruction;
    const uint32_t opcode = reader.scalar<uint32_t>("opcode");
    if (opcode < static_cast<uint32_t>(Opcode::kRelu) || opcode > static_cast<uint32_t>(Opcode::kLast)) {
      throw_user_error("test backend payload: instruction ", i, " has unknown opcode ", opcode);
    }
    instruction.opcode = static_cast<Opcode>(opcode);
    instruction.node_index = reader.scalar<uint32_t>("node index");
    instruction.inputs = reader.list<int32_t>("input ids", kMaxOperands, i);
    instruction.outputs = reader.list<int32_t>("output ids", kMaxOperands, i);
    instruction.ints = reader.list<int64_t>("integer attributes", kMaxInts, i);
    instruction.floats = reader.list<float>("float attributes", kMaxFloats, i);
    program.instructions.push_back(std::move(instruction));
  }
  if (reader.remaining() != 0) {
    throw_user_error("test backend payload: ", reader.remaining(), " unexpected bytes after the last instruction");
  }
  return program;
}

}  // namespace tessera::test_backend
