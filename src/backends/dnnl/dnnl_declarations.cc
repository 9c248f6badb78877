// What the oneDNN backend declares: the ops and fused patterns its lowering
// runs, each with the exact conditions (float32, static shapes, constant
// weights, attributes) under which it does; everything else is refused with
// the reason. The patterns become oneDNN post-ops: Conv+BatchNorm(folded)
// +Add(sum)+activation, MatMul+bias+activation (GELU included), Gemm +
// activation, Add + activation, GELU's erf form and the decomposed LayerNorm.
#include "backends/dnnl/dnnl_declarations.h"

#include "backends/dnnl/dnnl_lowering.h"
#include "backends/dnnl/dnnl_op_tables.h"
#include "backends/dnnl/dnnl_open_region.h"
#include "ir/int8_weights.h"
#include "partition/common_patterns.h"

namespace tessera::dnnl_backend {
namespace {

SupportDecision refuse(std::string reason) { return {false, std::move(reason)}; }
const SupportDecision kYes{true, ""};

const std::vector<int64_t>& dims(const Graph& graph, ValueId id) { return graph.value(id).type.dims; }

bool float32_static_node(const Graph& graph, const Node& node) { return float32_static(graph, node).supported; }
bool is_activation(const Graph& graph, const Node& node) { return check_activation(graph, node).supported; }

/// Add of the Conv's output and a same-shape value (sum post-op), or a
/// per-channel constant (the bias).
bool conv_add_fuses(const Graph& graph, const Node& add) {
  if (!float32_static_node(graph, add) || add.inputs.size() != 2) return false;
  const auto& y = dims(graph, add.outputs[0]);
  for (ValueId in : add.inputs) {
    const auto& d = dims(graph, in);
    if (d == y && !graph.is_constant(in)) continue;
    if (graph.is_constant(in) && y.size() >= 2 && shape_numel(d) == y[1] && (d.size() == y.size() || d.size() == y.size() - 1) &&
        d[d.size() - (y.size() - 2) - 1] == y[1]) {
      continue;
    }
    return false;
  }
  return true;
}

/// Add of the MatMul's output and a constant bias over the last axis.
bool matmul_bias_fuses(const Graph& graph, const Node& add) {
  if (!float32_static_node(graph, add) || add.inputs.size() != 2 || dims(graph, add.outputs[0]).empty()) return false;
  const int64_t n = dims(graph, add.outputs[0]).back();
  for (ValueId in : add.inputs) {
    const auto& d = dims(graph, in);
    if (graph.is_constant(in) && shape_numel(d) == n && !d.empty() && d.back() == n) return true;
  }
  return false;
}

/// HardSigmoid with HardSwish's constants (alpha 1/6, beta 1/2): the gate of
/// x * HardSigmoid(x), which is how torch exports nn.Hardswish below opset 14.
bool is_hardswish_gate(const Graph& graph, const Node& node) {
  return float32_static_node(graph, node) && is_hardswish_gate_attributes(node);
}

/// x * gate(x), either operand order, for a `gate_op` node that passes `gate_check`.
std::vector<Pattern> self_gated_forms(const char* gate_op, bool (*gate_check)(const Graph&, const Node&), Pattern x) {
  Pattern gate = op(gate_op, {x});
  gate.where(gate_check);
  std::vector<Pattern> forms = {op("Mul", {x, gate}), op("Mul", {gate, x})};
  for (Pattern& product : forms) product.where(float32_static_node);
  return forms;
}

/// x * Sigmoid(x): SiLU as exporters write it, one eltwise_swish.
std::vector<Pattern> silu_forms(Pattern x) { return self_gated_forms("Sigmoid", is_activation, std::move(x)); }

/// x * HardSigmoid(x) with HardSwish's constants: one eltwise_hardswish.
std::vector<Pattern> hardswish_forms(Pattern x) { return self_gated_forms("HardSigmoid", is_hardswish_gate, std::move(x)); }

/// `x` followed by an activation that fuses (eltwise_ops() rows marked `fuses`;
/// Clip with its bounds as constant or absent inputs).
Pattern activation_of(Pattern x) {
  auto bound = [] { return either({constant(), absent()}); };
  std::vector<std::string> unary;
  std::vector<Pattern> forms;
  for (const EltwiseOp& row : eltwise_ops()) {
    if (!row.fuses) continue;
    if (row.parameters != EltwiseParameters::kClipBounds) {
      unary.push_back(row.op_type);
      continue;
    }
    forms.push_back(op(row.op_type, {x}));
    forms.push_back(op(row.op_type, {x, bound()}));
    forms.push_back(op(row.op_type, {x, bound(), bound()}));
  }
  forms.insert(forms.begin(), op_in(unary, {x}));
  for (Pattern& p : forms) p.where(is_activation);
  // SiLU and HardSwish as exporters write them: one eltwise_swish / eltwise_hardswish post-op
  // (chain_gated_activation).
  for (Pattern& product : silu_forms(x)) forms.push_back(std::move(product));
  for (Pattern& product : hardswish_forms(x)) forms.push_back(std::move(product));
  return either(forms);
}

Declarations make_declarations() {
  Declarations d;
  // Every op claimed is one row of the op tables (dnnl_op_tables.cc). Max, Min,
  // Exp, Clip, Relu, MaxPool, Softmax and LogSoftmax drop or invent NaN/Inf for
  // non-finite inputs: claimed all the same, the runtime runs their region on
  // native when an input is not finite (the tables' finite_only, read by
  // finite_only_reason in dnnl_nan_semantics.cc), and again on native after
  // a run that made a NaN or Inf from finite inputs (an overflow to Inf, then
  // Inf - Inf), seen by the CPU's floating-point flags.
  for (const StructuredOp& row : structured_ops()) d.op(row.op_type, row.check);
  for (const BinaryOp& row : binary_ops()) d.op(row.op_type, check_binary);
  for (const EltwiseOp& row : eltwise_ops()) {
    if (row.claimed) d.op(row.op_type, check_activation);
  }
  for (const PoolingOp& row : pooling_ops()) d.op(row.op_type, check_pooling);
  // HardSigmoid (max(0, min(1, alpha x + beta))), which oneDNN 2.6 has no eltwise for: an eltwise_linear
  // and an eltwise_clip (lower_elementwise). torchvision's MobileNetV3 has 29 of them; on native each cut
  // the oneDNN region around it.
  d.op("HardSigmoid", [](const Graph& g, const Node& n) { return float32_static(g, n); });

  auto conv = [] {
    Pattern c = op("Conv");
    c.where([](const Graph& g, const Node& n) { return check_conv(g, n).supported; });
    return c;
  };
  auto batch_norm = [](Pattern x) {
    Pattern bn = op("BatchNormalization", {x, constant(), constant(), constant(), constant()});
    bn.where(float32_static_node);
    return bn;
  };
  auto conv_add = [](Pattern x) {
    Pattern add = op("Add", {x, any()});
    add.where(conv_add_fuses);
    return add;
  };
  auto matmul = [] {
    Pattern m = op_in({"MatMul"});
    m.where([](const Graph& g, const Node& n) { return check_matmul(g, n).supported; });
    return m;
  };
  auto matmul_bias = [&] {
    Pattern add = op("Add", {matmul(), any()});
    add.where(matmul_bias_fuses);
    return add;
  };
  // A residual in a QDQ model: Q(act(DQ(QLinearConv) + DQ(other))) as one int8 convolution whose sum
  // post-op reads `other`'s 8-bit values (dnnl_lower_quantized.cc; the convolution's output is not
  // rounded to its own 8-bit grid first).
  auto qlinear_conv = [] {
    Pattern c = op("QLinearConv");
    c.where([](const Graph& g, const Node& n) { return check_qlinear(g, n).supported; });
    return c;
  };
  auto dequantize = [](Pattern x) {
    Pattern dq = op("DequantizeLinear", {x, constant(), constant()});
    dq.where([](const Graph& g, const Node& n) { return check_quantize_linear(g, n).supported; });
    return dq;
  };
  // The DequantizeLinear of a QLinear op's output with that op's own scale and zero point (a fusion that
  // skips the rounding between them computes what the pair means, but for that rounding).
  auto dequantize_own = [](Pattern x) {
    Pattern dq = op("DequantizeLinear", {x, constant(), constant()});
    dq.where([](const Graph& g, const Node& n) {
      return check_quantize_linear(g, n).supported && dequantizes_with_producer_parameters(g, n);
    });
    return dq;
  };
  auto residual_add = [&] {
    Pattern add = op("Add", {dequantize_own(qlinear_conv()), dequantize(any())});
    add.where([](const Graph& g, const Node& n) {
      return float32_static_node(g, n) && dims(g, n.inputs[0]) == dims(g, n.inputs[1]);
    });
    return add;
  };
  auto quantize = [](Pattern x) {
    Pattern q = op("QuantizeLinear", {x, constant(), constant()});
    q.where([](const Graph& g, const Node& n) { return check_quantize_linear(g, n).supported; });
    return q;
  };
  d.pattern("QLinearConvAddActivation", quantize(activation_of(residual_add())));
  d.pattern("QLinearConvAdd", quantize(residual_add()));
  Pattern qlinear_matmul = op("QLinearMatMul");
  qlinear_matmul.where([](const Graph& g, const Node& n) {
    return check_qlinear(g, n).supported && n.has_input(3) && g.is_constant(n.inputs[3]);
  });
  // A transformer's first feed-forward layer in a QDQ model: Q(GELU(DQ(QLinearMatMul) + bias)) as one int8
  // matmul whose post-ops add the bias, apply GELU and requantize.
  Pattern qlinear_bias = op("Add", {dequantize_own(qlinear_matmul), constant()});
  qlinear_bias.where(matmul_bias_fuses);
  d.pattern("QLinearMatMulBiasGeluQuantize", quantize(gelu_erf_pattern(qlinear_bias, float32_static_node)));
  d.pattern("QLinearMatMulDequantize", dequantize_own(qlinear_matmul));
  // What passes/fold_qdq.cc makes of a QDQ product left in float32 (a classifier's Gemm):
  // MatMulInteger -> Cast(float) -> Mul(scales) [-> Add(bias)] as one int8 matmul writing float32.
  Pattern matmul_integer = op("MatMulInteger");
  matmul_integer.where([](const Graph& g, const Node& n) { return check_matmul_integer(g, n).supported; });
  Pattern to_float = op("Cast", {matmul_integer});
  to_float.where([](const Graph& g, const Node& n) {
    return n.attrs.get_int_or("to", 0) == 1 && g.value(n.outputs[0]).type.dtype == DType::kFloat32;
  });
  Pattern scaled = op("Mul", {to_float, constant()});
  scaled.where(scales_columns);
  Pattern scaled_bias = op("Add", {scaled, constant()});
  scaled_bias.where(matmul_bias_fuses);
  d.pattern("MatMulIntegerScaleBias", scaled_bias);
  d.pattern("MatMulIntegerScale", scaled);
  d.pattern("ConvBatchNormAddActivation", activation_of(conv_add(batch_norm(conv()))));
  d.pattern("ConvAddActivation", activation_of(conv_add(conv())));
  d.pattern("ConvBatchNormActivation", activation_of(batch_norm(conv())));
  d.pattern("ConvBatchNormAdd", conv_add(batch_norm(conv())));
  d.pattern("ConvAdd", conv_add(conv()));
  d.pattern("ConvBatchNorm", batch_norm(conv()));
  d.pattern("ConvActivation", activation_of(conv()));
  // A pre-activation network's BatchNormalization -> Relu (DenseNet: before each layer's 1x1 convolution,
  // where the Relu keeps the batch norm from folding into it): one batch norm step with oneDNN's
  // fuse_norm_relu, one pass over the tensor instead of two.
  Pattern relu = op("Relu", {batch_norm(any())});
  relu.where(is_activation);
  d.pattern("BatchNormRelu", relu);
  d.pattern("MatMulBiasGelu", gelu_erf_pattern(matmul_bias(), float32_static_node));
  d.pattern("MatMulBiasActivation", activation_of(matmul_bias()));
  d.pattern("MatMulBias", matmul_bias());
  d.pattern("MatMulGelu", gelu_erf_pattern(matmul(), float32_static_node));
  Pattern gemm = op("Gemm");
  gemm.where([](const Graph& g, const Node& n) { return check_gemm(g, n).supported; });
  d.pattern("GemmActivation", activation_of(gemm));
  std::vector<std::string> binary_fusing;
  for (const BinaryOp& row : binary_ops()) {
    if (row.fuses) binary_fusing.push_back(row.op_type);
  }
  Pattern binary = op_in(binary_fusing);
  binary.where([](const Graph& g, const Node& n) { return check_binary(g, n).supported; });
  d.pattern("BinaryActivation", activation_of(binary));
  d.pattern("Gelu", gelu_erf_pattern(any(), float32_static_node));
  for (Pattern& product : silu_forms(any())) d.pattern("Swish", std::move(product));
  for (Pattern& product : hardswish_forms(any())) d.pattern("HardSwishProduct", std::move(product));
  // (ReduceMean's axes are an int64 input: only its data must be float32.)
  d.pattern("LayerNorm", layer_norm_pattern(any(), [](const Graph& g, const Node& n) {
              return float32_static(g, n, n.op_type == "ReduceMean" ? 1 : SIZE_MAX).supported;
            }));
  return d;
}

}  // namespace

SupportDecision check_conv(const Graph& graph, const Node& node) {
  SupportDecision d = float32_static(graph, node);
  if (!d.supported) return d;
  const int64_t rank = graph.value(node.inputs[0]).type.rank();
  if (rank < 3 || rank > 5) return refuse("Conv of rank " + std::to_string(rank) + "; oneDNN has 1-D to 3-D");
  if (!graph.is_constant(node.inputs[1])) return refuse("weights are not a constant");
  if (node.has_input(2) && !graph.is_constant(node.inputs[2])) return refuse("bias is not a constant");
  return kYes;
}

/// Weight-only int8 (ir/int8_weights.h): native reads the 8-bit weights; here they would be
/// dequantized to float32 on every run.
const SupportDecision kInt8WeightsElsewhere{
    false, "its weights are int8 behind a DequantizeLinear (native's MatMulInt8Weights reads them as they are)"};

/// A float32 product against constant weights of kSlowBrgemmMinWeights or more whose rows (the first
/// operand's dims but its last) are open: native's. Native packs the weights once, at compile time, and
/// its kernels run every row count from that one copy; oneDNN would run the calls of four rows and more
/// from its own copy while the few-row calls (a decoder's tokens, slow_kernel_reason) fell back to native
/// reading the plain weights in place, 23 GB/s against 31 from the packed copy on one core (Zen 4).
/// GPT-2 small with its length open, 32-token prompt then single tokens (Zen 4, three alternating runs):
/// 1 thread prompt 99 -> 83 ms, token 28.2 -> 21.0; 2 threads 61 -> 47-56 and 20.3 -> 18.1, resident
/// memory the same. A chain of BERT-base's products alone: native 1.1-1.9x as fast from 1 to 16 rows, as
/// fast at 32, 0.90-0.95x from 64 to 512 rows; the BERT-shaped encoder's trace of lengths 1..512 read
/// as before. Static rows keep oneDNN and its guard.
SupportDecision open_rows_product(const Graph& graph, const Node& node) {
  if (node.inputs.size() < 2 || !graph.is_constant(node.inputs[1])) return kYes;
  const Tensor& weights = *graph.value(node.inputs[1]).constant;
  if (weights.dtype() != DType::kFloat32 || weights.numel() < kSlowBrgemmMinWeights) return kYes;
  const TensorType& a = graph.value(node.inputs[0]).type;
  bool open = !a.rank_known;
  for (size_t d = 0; !open && d + 1 < a.dims.size(); ++d) open = a.dims[d] < 0;
  return open ? refuse(kOpenRowsProductRefusal) : kYes;
}

SupportDecision check_matmul(const Graph& graph, const Node& node) {
  SupportDecision d = float32_static(graph, node);
  if (!d.supported) return d;
  const auto& a = dims(graph, node.inputs[0]);
  const auto& b = dims(graph, node.inputs[1]);
  const auto& y = dims(graph, node.outputs[0]);
  if (a.size() < 2 || b.size() < 2) return refuse("1-D operands are not supported");
  if (a.size() != y.size()) return refuse("the first operand has a lower rank than the output");
  if (b.size() != y.size() && !graph.is_constant(node.inputs[1])) {
    return refuse("a computed second operand of lower rank than the output");
  }
  // Open dims: a computed second operand whose dims are open (attention over a growing key/value cache)
  // runs on native, as compiling its region would find (shape_refusals, dnnl_open_region.cc, says why);
  // said here, the first partition already leaves it out instead of a round of compiles finding it.
  if (!graph.is_constant(node.inputs[1]) && !graph.value(node.inputs[1]).type.is_static()) {
    return refuse(kOpenDimsProductRefusal);
  }
  if (SupportDecision open = open_rows_product(graph, node); !open.supported) return open;
  return int8_weights_of(graph, node) ? kInt8WeightsElsewhere : kYes;
}

SupportDecision check_gemm(const Graph& graph, const Node& node) {
  SupportDecision d = float32_static(graph, node);
  if (!d.supported) return d;
  if (int8_weights_of(graph, node)) return kInt8WeightsElsewhere;
  if (node.attrs.get_int_or("transA", 0) != 0) return refuse("transA = 1 is not supported");
  if (SupportDecision open = open_rows_product(graph, node); !open.supported) return open;
  const bool trans_b = node.attrs.get_int_or("transB", 0) != 0;
  const float alpha = node.attrs.get_float_or("alpha", 1.0f);
  const float beta = node.attrs.get_float_or("beta", 1.0f);
  if ((trans_b || alpha != 1.0f) && !graph.is_constant(node.inputs[1])) return refuse("transB or alpha with a computed B");
  if (node.has_input(2)) {
    const auto& c = dims(graph, node.inputs[2]);
    const auto& y = dims(graph, node.outputs[0]);
    const int64_t n = y.back();
    const bool constant = graph.is_constant(node.inputs[2]);
    const bool bias = constant && shape_numel(c) == n && (c.empty() || c.back() == n);
    const bool full = constant && c == y;
    const bool computed = !constant && beta == 1.0f && c.size() == y.size();
    if (!bias && !full && !computed) return refuse("C must be a constant bias, a constant [M, N], or computed with beta = 1");
  }
  return kYes;
}

SupportDecision check_binary(const Graph& graph, const Node& node) {
  SupportDecision d = float32_static(graph, node);
  if (!d.supported) return d;
  if (node.inputs.size() != 2) return refuse("only two operands");
  const auto& y = dims(graph, node.outputs[0]);
  const auto& a = dims(graph, node.inputs[0]);
  const auto& b = dims(graph, node.inputs[1]);
  const BinaryOp* row = node.domain.empty() ? find_binary_op(node.op_type) : nullptr;
  const bool commutative = row && row->commutative;
  ValueId broadcast = node.inputs[1];
  // c - x with a constant scalar c: one eltwise_linear (-x + c), as lower_elementwise's scalar_linear makes it.
  if (node.op_type == "Sub" && b == y && finite_scalar_constant(graph, node.inputs[0])) return kYes;
  if (a != y) {
    if (!commutative || b != y) return refuse("the first operand broadcasts (oneDNN broadcasts only the second)");
    broadcast = node.inputs[0];
  }
  if (dims(graph, broadcast).size() != y.size() && !graph.is_constant(broadcast)) {
    return refuse("a computed operand of lower rank");
  }
  return kYes;
}

SupportDecision check_activation(const Graph& graph, const Node& node) {
  SupportDecision d = float32_static(graph, node);
  if (!d.supported) return d;
  if (!activation_post_op(graph, node)) {
    const EltwiseOp* row = node.domain.empty() ? find_eltwise_op(node.op_type) : nullptr;
    if (row && row->parameters == EltwiseParameters::kClipBounds) {
      return refuse(node.op_type + " with bounds that are not float32 scalar constants, or as attributes (opset < 11)");
    }
    return refuse(node.op_type + " is not an activation oneDNN runs");
  }
  return kYes;
}

namespace {

SupportDecision float32_static_value(const Graph& graph, const std::string& what, ValueId id) {
  const Value& v = graph.value(id);
  const std::string named = what + " '" + v.name + "'";
  if (v.type.dtype != DType::kFloat32) return refuse(named + " is " + dtype_name(v.type.dtype) + "; oneDNN runs float32 here");
  if (!v.type.is_tensor() || !v.type.rank_known) return refuse(named + " has a rank known only at run time");
  if (v.type.rank() > 6) return refuse(named + " has rank " + std::to_string(v.type.rank()) + " (at most 6)");
  for (int64_t d : v.type.dims) {
    if (d == 0) return refuse(named + " is empty");
  }
  // Open dims (a model compiled with symbolic dims): the region is lowered per input shape at run
  // time, where these checks run again at the concrete dims (dnnl_open_region.cc).
  if (!v.type.is_static()) return kYes;
  // The payload's own limits (dnnl_internal.h): a value past them runs elsewhere instead of failing
  // when the payload loads. The core has already checked that the size fits kMaxTensorBytes, so the
  // product cannot overflow.
  const int64_t max_elements = v.constant ? kMaxConstantElements : kMaxSlotElements;
  int64_t elements = 1;
  for (int64_t d : v.type.dims) elements *= d;
  if (elements > max_elements) {
    return refuse(named + " has " + std::to_string(elements) + " elements; oneDNN payloads hold at most " +
                  std::to_string(max_elements) + " per " + (v.constant ? "constant" : "value"));
  }
  return kYes;
}

}  // namespace

SupportDecision float32_static(const Graph& graph, const Node& node, size_t data_inputs) {
  for (size_t i = 0; i < node.inputs.size() && i < data_inputs; ++i) {
    if (node.inputs[i] == kNoValue) continue;
    SupportDecision d = float32_static_value(graph, "input " + std::to_string(i), node.inputs[i]);
    if (!d.supported) return d;
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kNoValue) continue;
    SupportDecision d = float32_static_value(graph, "output " + std::to_string(i), node.outputs[i]);
    if (!d.supported) return d;
  }
  return kYes;
}

const Declarations& dnnl_declarations() {
  static const Declarations declarations = make_declarations();
  return declarations;
}

}  // namespace tessera::dnnl_backend
