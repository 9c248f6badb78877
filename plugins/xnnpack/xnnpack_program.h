// The XNNPACK plug-in's program: what one region's XNNPACK subgraph is made of,
// in the plug-in's own terms (never XNNPACK internals, which cannot be
// serialised). It is the payload (serialise / parse, format version 1) and the
// input of the subgraph builder (xnnpack_region.cc).
//
// Contract:
//  - Layout rule (fixed by format version 1): a rank-4 region value is NHWC
//    inside the subgraph (NCHW outside), a rank-0 value is [1], every other
//    value keeps its dims. Static tensors are re-laid out from a region
//    constant by a named transform (OIHW→OHWI, ...), once, at load.
//  - Tensors hold no dims in the payload: region inputs/outputs and statics get
//    theirs from the region graph, internal tensors from their producing op's
//    shape rule (infer_op). So a hostile payload can choose parameters, never a
//    buffer size that disagrees with what XNNPACK will write.
//  - resolve_program() checks a parsed program against the region graph: every
//    index, every static's source bytes, every op's parameter count and shape
//    rule, that each tensor is produced once before it is read and that every
//    region output is produced with the region graph's shape. Errors are
//    messages (no exceptions leave this file's functions).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <tessera/backend_plugin.h>

namespace tessera_xnnpack {

constexpr uint32_t kPayloadMagic = 0x504e5854;  // "TXNP" little-endian
constexpr uint32_t kPayloadVersion = 1;
constexpr uint32_t kNoTensor = 0xffffffffu;
constexpr size_t kMaxRank = 6;                    // XNN_MAX_TENSOR_DIMS
constexpr uint64_t kMaxElements = uint64_t(1) << 30;  // per tensor, a payload limit

enum class OpCode : uint32_t {
  kConvolution = 1,          // ints: pt pr pb pl kh kw sh sw dh dw groups group_in group_out; floats: min max; in: x filter bias
  kDepthwiseConvolution,     // ints: pt pr pb pl kh kw sh sw dh dw multiplier channels; floats: min max; in: x filter bias
  kFullyConnected,           // floats: min max; in: x filter [bias]
  kMaxPooling,               // ints: pt pr pb pl kh kw sh sw dh dw; floats: min max
  kAveragePooling,           // ints: pt pr pb pl kh kw sh sw; floats: min max
  kGlobalAveragePooling,     // floats: min max
  kAdd, kMultiply, kSubtract, kDivide,  // floats: min max; in: a b
  kMaximum, kMinimum,        // in: a b
  kClamp,                    // floats: min max
  kSigmoid, kHardSwish,
  kLeakyRelu,                // floats: slope
  kElu,                      // floats: alpha
  kPRelu,                    // in: x slope[C]
  kSoftmax,                  // over the last dim
  kAbs, kNegate, kCeiling, kFloor, kSquareRoot, kBankersRounding,
  kStaticReshape,            // ints: new dims
  kStaticConstantPad,        // ints: pre[rank] post[rank]; floats: value
  kEnd
};
const char* op_code_name(OpCode code);

enum class TensorKind : uint32_t { kInternal = 0, kRegionInput = 1, kRegionOutput = 2, kStatic = 3 };

// How a static tensor is made from its source constant (always float32).
enum class StaticTransform : uint32_t {
  kCopy = 0,             // dims as laid out (rank-4 sources are refused: use kToNhwc)
  kFlatten,              // [numel]
  kTranspose2d,          // [K, N] → [N, K]
  kFilterOhwi,           // [O, I, KH, KW] → [O, KH, KW, I]
  kFilterDepthwise,      // [O, 1, KH, KW] → [1, KH, KW, O]
  kToNhwc,               // rank ≤ 4, right-aligned to NCHW, then → NHWC
  kZeros,                // no source: [count] zeros
  kFill,                 // one-element source: [count] copies
  kEnd
};

struct Tensor {
  TensorKind kind = TensorKind::kInternal;
  int32_t ref = -1;    // region input / region output index, or the static's source value index
  int32_t scope = -1;  // static: -1 for the region graph, k for the body of region node k (a composite)
  StaticTransform transform = StaticTransform::kCopy;
  uint32_t count = 0;  // kZeros / kFill
  float scale = 1.0f;  // static: every element multiplied by it
};

struct Op {
  OpCode code = OpCode::kEnd;
  int32_t region_node = -1;  // the region node it comes from (reports)
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

struct Program {
  std::vector<Tensor> tensors;
  std::vector<Op> ops;
};

using Dims = std::vector<size_t>;

std::vector<uint8_t> serialize_program(const Program& program);
/// Parses bytes (possibly hostile) into a program; checks lengths and counts only.
bool parse_program(const void* data, size_t size, Program* out, std::string* error);

/// A program checked against its region graph, with every tensor's dims (XNNPACK layout).
struct ResolvedProgram {
  std::vector<Dims> dims;
  std::vector<const tsrp_value*> source;  // statics: the source constant (NULL for kZeros)
  std::vector<uint32_t> input_tensor;     // per region input: tensor id or kNoTensor (unused)
  std::vector<uint32_t> output_tensor;    // per region output
};
bool resolve_program(const tsrp_graph* region, const Program& program, ResolvedProgram* out, std::string* error);

/// The shape rule of each op: output dims from input dims and parameters, or an error.
bool infer_op(const Op& op, const std::vector<const Dims*>& inputs, Dims* out, std::string* error);
/// A region value's dims inside the subgraph (the layout rule above); false for unknown dims.
bool layout_dims(const tsrp_value* value, Dims* out);
/// Dims of a static tensor made from `source` (may be NULL for kZeros) by its transform.
bool static_dims(const Tensor& tensor, const tsrp_value* source, Dims* out, std::string* error);
/// Writes the static tensor's float data (numel of dims) from its source.
void fill_static(const Tensor& tensor, const tsrp_value* source, const Dims& dims, float* out);
uint64_t element_count(const Dims& dims);
std::string dims_text(const Dims& dims);

}  // namespace tessera_xnnpack
