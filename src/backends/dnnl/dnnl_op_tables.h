// The oneDNN backend's op facts, one table per op family: which ONNX ops it
// claims, the oneDNN algorithm or step each becomes, where an algorithm's
// parameters come from, and which algorithms keep numpy's NaN and ±Inf
// semantics. The declarations (dnnl_declarations*.cc), the lowering
// (dnnl_lowering.cc, dnnl_lower_*.cc) and the NaN table
// (dnnl_nan_semantics.cc) all read these rows, so adding an op to the
// backend is one row here (and its check, for a structured op).
//
// Contract: plain constant data and look-ups, no state. Attribute defaults
// are not restated here: the importer and the graph builder fill them from
// the ir's op schemas (the one definition of each op), and a row names only
// the attribute. Every element-wise and binary row is float32 only, with
// static shapes (float32_static in dnnl_declarations.h), like every op the
// backend claims.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <vector>
#include <string>

#include "backends/dnnl/dnnl_internal.h"
#include "partition/declarations.h"

namespace tessera::dnnl_backend {

/// The lowering function (dnnl_lowering.h) that runs an op.
enum class OpFamily : uint8_t { kConvolution, kMatMul, kElementwise, kPooling, kNormalization, kLayout, kQuantized };

// --- element-wise (oneDNN eltwise, as a step or a post-op) ---

/// Where an eltwise row's alpha and beta come from.
enum class EltwiseParameters : uint8_t {
  kFixed,           // alpha and beta as in the row
  kAlphaAttribute,  // alpha from the float attribute `alpha_attribute`, beta as in the row
  kClipBounds,      // Clip: alpha and beta are inputs 1 and 2 (float32 scalar constants; -FLT_MAX, FLT_MAX when absent)
};

struct EltwiseOp {
  const char* op_type;  // ONNX op; "" for an algorithm only a pattern or an older payload holds
  dnnl::algorithm algorithm;
  EltwiseParameters parameters;
  const char* alpha_attribute;  // kAlphaAttribute: the attribute's name
  float alpha;                  // kFixed: alpha
  float beta;                   // kFixed, kAlphaAttribute: beta
  bool claimed;                 // declared as an op of its own
  bool fuses;                   // accepted as the activation that ends a fused pattern (activation_of)
  /// Why it drops or invents NaN/±Inf (finite_only_reason), nullptr when NaN-exact.
  const char* finite_only;
  bool finite_only_when_alpha_zero;  // the reason holds only for alpha == 0
};

std::span<const EltwiseOp> eltwise_ops();
/// The row of ONNX op `op_type` (default domain), or nullptr.
const EltwiseOp* find_eltwise_op(const std::string& op_type);
/// The first row with `algorithm` (rows sharing one agree on its NaN facts), or nullptr.
const EltwiseOp* find_eltwise_algorithm(int32_t algorithm);

// --- binary (oneDNN binary, as a step or a post-op) ---

struct BinaryOp {
  const char* op_type;
  dnnl::algorithm algorithm;
  bool commutative;  // the broadcast operand may be the first (it is swapped second)
  bool fuses;        // an activation after it fuses (pattern BinaryActivation)
  const char* finite_only;
};

std::span<const BinaryOp> binary_ops();
const BinaryOp* find_binary_op(const std::string& op_type);
const BinaryOp* find_binary_algorithm(int32_t algorithm);

// --- pooling (oneDNN pooling_v2) ---

struct PoolingOp {
  const char* op_type;
  dnnl::algorithm algorithm;  // for AveragePool: with count_include_pad = 0
  bool global;                // the window is the whole spatial extent
  const char* include_padding_attribute;  // "count_include_pad" (AveragePool), else nullptr
  dnnl::algorithm include_padding_algorithm;  // when that attribute is non-zero
  const char* finite_only;
};

std::span<const PoolingOp> pooling_ops();
const PoolingOp* find_pooling_op(const std::string& op_type);
/// The first row whose algorithm (either one) is `algorithm`, or nullptr.
const PoolingOp* find_pooling_algorithm(int32_t algorithm);

// --- convolution algorithms (chosen by measurement, dnnl_tuning.cc) ---

struct ConvolutionAlgorithm {
  dnnl::algorithm algorithm;
  const char* name;  // for TESSERA_DNNL_TUNING_LOG
  const char* finite_only;
};

/// Direct first (the default), then oneDNN's Winograd, then Tessera's (kTesseraWinograd).
std::span<const ConvolutionAlgorithm> convolution_algorithms();
/// What choose_convolution_algorithm tries, in order: every algorithm above; or, for a region of open
/// dims, Tessera's Winograd then the direct convolution. Not oneDNN's Winograd there: it lays its weights
/// out for each shape's tiling, so every new shape would transform them again, where Tessera's kernel
/// shares its transformed weights across shapes.
std::vector<ConvolutionAlgorithm> convolution_candidates(bool open_dims);
const ConvolutionAlgorithm* find_convolution_algorithm(int32_t algorithm);

// --- every other op: one row each, with its check ---

struct StructuredOp {
  const char* op_type;
  OpFamily family;
  StepKind step;  // the step it lowers to (kReorder for views; Identity makes none)
  SupportDecision (*check)(const Graph& graph, const Node& node);  // dnnl_declarations.h
  const char* finite_only;  // why every step of this kind may drop NaN/±Inf, nullptr when exact
};

std::span<const StructuredOp> structured_ops();
const StructuredOp* find_structured_op(const std::string& op_type);
/// The first row lowered to `kind`, or nullptr.
const StructuredOp* find_structured_step(StepKind kind);

/// The family whose lowering runs ONNX op `op_type`, from the tables above;
/// kElementwise for an op none of them holds (its lowering refuses it by name).
OpFamily op_family(const std::string& op_type);

/// Float attribute `name` of `node`, or the default its ir op schema gives
/// (where the importer takes it from too); an internal error when it has none.
float float_attribute(const Node& node, const char* name);

}  // namespace tessera::dnnl_backend
