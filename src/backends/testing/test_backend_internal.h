// Shared inside the test backend: the program (one instruction per region-graph
// node) that compile() lowers a region to and that the payload serializes, the
// host kernels that instructions run, and the declarations.
//
// Flow: lower_region (graph → Program) → serialize_program (Program → payload)
// → parse_program (payload → Program, bounds-checked) → check_program_against
// (Program vs the region graph: ids, ops, shapes) → TestRegion::run.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {
class Declarations;
}

namespace tessera::test_backend {

enum class Opcode : uint32_t {
  kRelu = 1,
  kSigmoid,
  kTanh,
  kNeg,
  kAbs,
  kExp,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMatMul,
  kGemm,     // ints {transA, transB}, floats {alpha, beta}; inputs A, B[, C]
  kSoftmax,  // ints {axis >= 0}
  kTranspose,  // ints perm
  kCopy,       // Reshape / Flatten: same bytes, another shape
  // Fused instructions from composites.
  kGelu,            // floats {divisor, addend, scale}; inputs x
  kAddRelu,         // inputs a, b
  kMatMulBias,      // inputs a, weight, bias
  kMatMulBiasRelu,  // inputs a, weight, bias
  kMatMulBiasGelu,  // inputs a, weight, bias; floats as kGelu
  kLast = kMatMulBiasGelu,
};

const char* opcode_name(Opcode opcode);

struct Instruction {
  Opcode opcode = Opcode::kRelu;
  uint32_t node_index = 0;  // the region-graph node it runs
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

struct Program {
  uint32_t value_count = 0;  // the region graph's value count, checked at load
  std::vector<Instruction> instructions;
};

// --- payload (test_backend_program.cc) ---
std::vector<uint8_t> serialize_program(const Program& program);
/// Throws a user error "test backend payload: ..." for anything malformed.
Program parse_program(std::span<const uint8_t> payload);

// --- lowering and checks (test_backend_lowering.cc) ---
/// One instruction per node; composites become fused instructions after their
/// body graph is checked against the pattern (an internal error otherwise).
Program lower_region(const Graph& region);
/// Checks a parsed program against the region graph: value ids in range and of
/// static float32 type, each instruction's op and operands those of its node,
/// shapes consistent with the op, so that running it stays in bounds. Throws
/// a user error "test backend payload: ..." otherwise.
void check_program_against(const Program& program, const Graph& region);

// --- declarations (test_backend_declarations.cc) ---
Declarations make_test_declarations();

// --- host kernels (test_backend_kernels.cc): plain loops on float32 ---
using Floats = std::vector<float>;

/// Output shape of numpy (multidirectional) broadcasting; false if incompatible.
bool broadcast_shape(const Shape& a, const Shape& b, Shape& out);
/// Output shape of MatMul with both ranks >= 2 and batch broadcasting; false if incompatible.
bool matmul_shape(const Shape& a, const Shape& b, Shape& out);

void run_unary(Opcode opcode, const Floats& input, Floats& output);
/// Add / Sub / Mul / Div with broadcasting to out_shape.
void run_binary(Opcode opcode, const Floats& a, const Shape& a_shape, const Floats& b, const Shape& b_shape,
                Floats& output, const Shape& out_shape);
void run_matmul(const Floats& a, const Shape& a_shape, const Floats& b, const Shape& b_shape, Floats& output,
                const Shape& out_shape);
/// c may be empty (no C); c_shape then ignored.
void run_gemm(const Floats& a, const Shape& a_shape, const Floats& b, const Shape& b_shape, const Floats& c,
              const Shape& c_shape, bool trans_a, bool trans_b, float alpha, float beta, Floats& output,
              const Shape& out_shape);
void run_softmax(const Floats& input, const Shape& shape, int64_t axis, Floats& output);
void run_transpose(const Floats& input, const Shape& shape, const std::vector<int64_t>& perm, Floats& output);
/// The erf form: ((x * (erf(x / divisor) + addend)) * scale), in that order.
void run_gelu(const Floats& input, float divisor, float addend, float scale, Floats& output);

}  // namespace tessera::test_backend
