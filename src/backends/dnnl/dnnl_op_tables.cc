// The oneDNN backend's op tables (see dnnl_op_tables.h): one row per op (or
// per algorithm a payload may hold), read by the declarations, the lowering
// and the NaN table.
#include "backends/dnnl/dnnl_op_tables.h"

#include "backends/dnnl/dnnl_declarations.h"
#include "ir/error.h"
#include "ir/op_schema.h"

namespace tessera::dnnl_backend {
namespace {

using dnnl::algorithm;
using P = EltwiseParameters;

// Measured on oneDNN 2.6's JIT kernels (tests/unit/dnnl_nan_test.cc feeds NaN
// and ±Inf to every op family claimed, against a scalar reference).
constexpr const char* kRelu = "relu is max(x, 0), which gives 0 for NaN";
constexpr const char* kClip = "clip is max(x, lower) then min(., upper), which gives the lower bound for NaN";
constexpr const char* kExp = "exp clamps its input with a max, which gives +Inf for NaN";
constexpr const char* kMaxMin = "binary max/min return the second operand where the first is NaN";
constexpr const char* kMaxPool = "max pooling drops NaN and gives -FLT_MAX for a window of -Inf";
constexpr const char* kSoftmax =
    "softmax drops NaN from its row maximum (the row is not all NaN as in numpy and PyTorch)";
constexpr const char* kWinograd =
    "Winograd convolution mixes neighbouring pixels in its transforms (an Inf becomes NaN beyond its window)";

// Relu stays eltwise_relu although it is exact only for finite inputs: the
// NaN-exact eltwise_elu with alpha 0 measured slower (docs/architecture.md).
// LeakyRelu with alpha != 0 is a compare and blend (NaN * alpha stays NaN).
// Not claimed: Log (oneDNN's eltwise_log is off by about 1e-6 absolute near 1,
// log(1) = -1.4e-6, beyond ONNX's tolerance).
const EltwiseOp kEltwiseOps[] = {
    // op           algorithm                     parameters         attr     alpha  beta  claim  fuses  finite_only  alpha 0
    {"Relu", algorithm::eltwise_relu, P::kFixed, nullptr, 0.0f, 0.0f, true, true, kRelu, true},
    {"LeakyRelu", algorithm::eltwise_relu, P::kAlphaAttribute, "alpha", 0.0f, 0.0f, true, true, kRelu, true},
    {"Sigmoid", algorithm::eltwise_logistic, P::kFixed, nullptr, 0.0f, 0.0f, true, true, nullptr, false},
    {"Tanh", algorithm::eltwise_tanh, P::kFixed, nullptr, 0.0f, 0.0f, true, true, nullptr, false},
    {"Elu", algorithm::eltwise_elu, P::kAlphaAttribute, "alpha", 0.0f, 0.0f, true, true, nullptr, false},
    {"Exp", algorithm::eltwise_exp, P::kFixed, nullptr, 0.0f, 0.0f, true, false, kExp, false},
    {"Log", algorithm::eltwise_log, P::kFixed, nullptr, 0.0f, 0.0f, false, false, nullptr, false},
    {"Sqrt", algorithm::eltwise_sqrt, P::kFixed, nullptr, 0.0f, 0.0f, true, false, nullptr, false},
    {"Abs", algorithm::eltwise_abs, P::kFixed, nullptr, 0.0f, 0.0f, true, false, nullptr, false},
    {"Neg", algorithm::eltwise_linear, P::kFixed, nullptr, -1.0f, 0.0f, true, false, nullptr, false},
    {"Softplus", algorithm::eltwise_soft_relu, P::kFixed, nullptr, 0.0f, 0.0f, true, true, nullptr, false},
    {"HardSwish", algorithm::eltwise_hardswish, P::kFixed, nullptr, 0.0f, 0.0f, true, true, nullptr, false},
    {"Mish", algorithm::eltwise_mish, P::kFixed, nullptr, 0.0f, 0.0f, true, true, nullptr, false},
    {"Clip", algorithm::eltwise_clip_v2, P::kClipBounds, nullptr, 0.0f, 0.0f, true, true, kClip, false},
    // SiLU, x * sigmoid(x): made by the Swish pattern and activation_of's product forms. Marked like
    // exp: its kernel computes through exp, which turns a NaN or -Inf input into what numpy does not.
    {"", algorithm::eltwise_swish, P::kFixed, nullptr, 1.0f, 0.0f, false, false, kExp, false},
    // The erf form of GELU: made by the Gelu, MatMulGelu and MatMulBiasGelu patterns.
    {"", algorithm::eltwise_gelu_erf, P::kFixed, nullptr, 0.0f, 0.0f, false, false, nullptr, false},
    // oneDNN's first clip: no op lowers to it, but a payload holding it is still marked.
    {"", algorithm::eltwise_clip, P::kFixed, nullptr, 0.0f, 0.0f, false, false, kClip, false},
};

const BinaryOp kBinaryOps[] = {
    // op     algorithm                commutative  fuses  finite_only
    {"Add", algorithm::binary_add, true, true, nullptr},
    {"Sub", algorithm::binary_sub, false, true, nullptr},
    {"Mul", algorithm::binary_mul, true, true, nullptr},
    {"Div", algorithm::binary_div, false, false, nullptr},
    {"Max", algorithm::binary_max, true, true, kMaxMin},
    {"Min", algorithm::binary_min, true, true, kMaxMin},
};

const PoolingOp kPoolingOps[] = {
    // op                 algorithm                                global  include attribute     algorithm with it
    {"MaxPool", algorithm::pooling_max, false, nullptr, algorithm::pooling_max, kMaxPool},
    {"AveragePool", algorithm::pooling_avg_exclude_padding, false, "count_include_pad",
     algorithm::pooling_avg_include_padding, nullptr},
    {"GlobalAveragePool", algorithm::pooling_avg_exclude_padding, true, nullptr,
     algorithm::pooling_avg_exclude_padding, nullptr},
    {"GlobalMaxPool", algorithm::pooling_max, true, nullptr, algorithm::pooling_max, kMaxPool},
};

const ConvolutionAlgorithm kConvolutionAlgorithms[] = {
    {algorithm::convolution_direct, "direct", nullptr},
    {algorithm::convolution_winograd, "winograd", kWinograd},
    {static_cast<algorithm>(kTesseraWinograd), "tessera winograd F(4x4,3x3)", kWinograd},
};

const StructuredOp kStructuredOps[] = {
    // op                     family                   step                          check
    {"Conv", OpFamily::kConvolution, StepKind::kConvolution, check_conv, nullptr},
    {"ConvTranspose", OpFamily::kConvolution, StepKind::kDeconvolution, check_conv_transpose, nullptr},
    {"MatMul", OpFamily::kMatMul, StepKind::kMatMul, check_matmul, nullptr},
    {"Gemm", OpFamily::kMatMul, StepKind::kMatMul, check_gemm, nullptr},
    {"BatchNormalization", OpFamily::kNormalization, StepKind::kBatchNorm, check_batch_norm, nullptr},
    {"LayerNormalization", OpFamily::kNormalization, StepKind::kLayerNorm, check_layer_norm, nullptr},
    {"Softmax", OpFamily::kNormalization, StepKind::kSoftmax, check_softmax, kSoftmax},
    {"LogSoftmax", OpFamily::kNormalization, StepKind::kLogSoftmax, check_softmax, kSoftmax},
    {"Concat", OpFamily::kLayout, StepKind::kConcat, check_concat, nullptr},
    {"Transpose", OpFamily::kLayout, StepKind::kReorder, check_transpose, nullptr},
    {"Slice", OpFamily::kLayout, StepKind::kReorder, check_slice, nullptr},
    {"Reshape", OpFamily::kLayout, StepKind::kReorder, check_reshape, nullptr},
    {"Flatten", OpFamily::kLayout, StepKind::kReorder, check_reshape, nullptr},
    {"Squeeze", OpFamily::kLayout, StepKind::kReorder, check_reshape, nullptr},
    {"Unsqueeze", OpFamily::kLayout, StepKind::kReorder, check_reshape, nullptr},
    {"Identity", OpFamily::kLayout, StepKind::kReorder, check_identity, nullptr},
    {"QLinearConv", OpFamily::kQuantized, StepKind::kConvolution, check_qlinear, nullptr},
    {"QLinearMatMul", OpFamily::kQuantized, StepKind::kMatMul, check_qlinear, nullptr},
    {"QuantizeLinear", OpFamily::kQuantized, StepKind::kReorder, check_quantize_linear, nullptr},
    {"DequantizeLinear", OpFamily::kQuantized, StepKind::kReorder, check_quantize_linear, nullptr},
};

template <typename Row, size_t N>
const Row* find_op(const Row (&rows)[N], const std::string& op_type) {
  if (op_type.empty()) return nullptr;
  for (const Row& row : rows) {
    if (op_type == row.op_type) return &row;
  }
  return nullptr;
}

}  // namespace

std::span<const EltwiseOp> eltwise_ops() { return kEltwiseOps; }
const EltwiseOp* find_eltwise_op(const std::string& op_type) { return find_op(kEltwiseOps, op_type); }
const EltwiseOp* find_eltwise_algorithm(int32_t alg) {
  for (const EltwiseOp& row : kEltwiseOps) {
    if (static_cast<int32_t>(row.algorithm) == alg) return &row;
  }
  return nullptr;
}

std::span<const BinaryOp> binary_ops() { return kBinaryOps; }
const BinaryOp* find_binary_op(const std::string& op_type) { return find_op(kBinaryOps, op_type); }
const BinaryOp* find_binary_algorithm(int32_t alg) {
  for (const BinaryOp& row : kBinaryOps) {
    if (static_cast<int32_t>(row.algorithm) == alg) return &row;
  }
  return nullptr;
}

std::span<const PoolingOp> pooling_ops() { return kPoolingOps; }
const PoolingOp* find_pooling_op(const std::string& op_type) { return find_op(kPoolingOps, op_type); }
const PoolingOp* find_pooling_algorithm(int32_t alg) {
  for (const PoolingOp& row : kPoolingOps) {
    if (static_cast<int32_t>(row.algorithm) == alg || static_cast<int32_t>(row.include_padding_algorithm) == alg) {
      return &row;
    }
  }
  return nullptr;
}

std::span<const ConvolutionAlgorithm> convolution_algorithms() { return kConvolutionAlgorithms; }
const ConvolutionAlgorithm* find_convolution_algorithm(int32_t alg) {
  for (const ConvolutionAlgorithm& row : kConvolutionAlgorithms) {
    if (static_cast<int32_t>(row.algorithm) == alg) return &row;
  }
  return nullptr;
}

std::span<const StructuredOp> structured_ops() { return kStructuredOps; }
const StructuredOp* find_structured_op(const std::string& op_type) { return find_op(kStructuredOps, op_type); }
const StructuredOp* find_structured_step(StepKind kind) {
  for (const StructuredOp& row : kStructuredOps) {
    if (row.step == kind) return &row;
  }
  return nullptr;
}

OpFamily op_family(const std::string& op_type) {
  if (const StructuredOp* row = find_structured_op(op_type)) return row->family;
  if (find_pooling_op(op_type)) return OpFamily::kPooling;
  return OpFamily::kElementwise;
}

float float_attribute(const Node& node, const char* name) {
  if (node.attrs.has(name)) return node.attrs.get_float(name);
  const OpSchema* schema = OpRegistry::instance().find(node.domain, node.op_type);
  if (schema) {
    for (const AttributeSpec& spec : schema->attributes) {
      if (spec.name == name && spec.default_value && spec.default_value->kind == Attribute::Kind::kFloat) {
        return spec.default_value->f;
      }
    }
  }
  throw_internal_error("oneDNN op tables: ", node.op_type, " has no default for float attribute '", name, "'");
}

}  // namespace tessera::dnnl_backend
