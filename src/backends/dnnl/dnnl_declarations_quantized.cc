// What the oneDNN backend claims of the quantized ops (lowered by
// dnnl_lower_quantized.cc): the conditions under which its int8 primitives
// compute what ONNX defines, each refusal naming what is missing.
#include "backends/dnnl/dnnl_declarations.h"
#include "backends/dnnl/dnnl_internal.h"

#include <algorithm>
#include <cstdlib>

namespace tessera::dnnl_backend {
namespace {

SupportDecision refuse(std::string reason) { return {false, std::move(reason)}; }
const SupportDecision kYes{true, ""};

bool eight_bit(DType d) { return d == DType::kUInt8 || d == DType::kInt8; }

/// A static, non-empty value of at most rank 6 and the payload's element limit.
SupportDecision static_value(const Graph& graph, ValueId id, const std::string& what) {
  const Value& v = graph.value(id);
  if (!v.type.is_static()) return refuse(what + " '" + v.name + "' has a shape known only at run time");
  if (v.type.rank() > 6) return refuse(what + " '" + v.name + "' has rank above 6");
  int64_t elements = 1;
  for (int64_t d : v.type.dims) {
    if (d == 0) return refuse(what + " '" + v.name + "' is empty");
    elements *= d;
  }
  if (elements > (v.constant ? kMaxConstantElements : kMaxSlotElements)) return refuse(what + " '" + v.name + "' is too large");
  return kYes;
}

/// Input `i` is a constant of `count` elements (0: a scalar) and, when `dtype` is set, of that dtype.
bool constant_of(const Graph& graph, const Node& node, size_t i, int64_t count, DType dtype = DType::kUndefined) {
  if (!node.has_input(i) || !graph.is_constant(node.inputs[i])) return false;
  const Tensor& t = *graph.value(node.inputs[i]).constant;
  if (dtype != DType::kUndefined && t.dtype() != dtype) return false;
  return count == 0 ? t.numel() == 1 : t.numel() == count;
}

bool all_zero(const Tensor& t) {
  for (int64_t k = 0; k < t.numel(); ++k) {
    if (t.int_at(k) != 0) return false;
  }
  return true;
}

/// Without VNNI, oneDNN's int8 kernels add pairs of u8 x s8 products in a
/// saturating int16 (oneDNN documents this for such CPUs), so they compute
/// what ONNX defines only when every weight is within kInt16SafeWeight
/// (int8 activations are shifted to u8 first, so they are bounded by 255 too).
/// `weights`: the constant int8 weights, or nullptr when they are computed.
SupportDecision int8_exact_on_this_cpu(const Tensor* weights) {
  if (cpu_has_vnni()) return kYes;
  const std::string cpu = "this CPU runs oneDNN at " + effective_isa_name() + ", without VNNI: its int8 kernels add pairs of "
                          "8-bit products in int16, which saturates";
  if (!weights) return refuse(cpu + " for weights computed at run time");
  // A plain, vectorised pass over the int8 bytes (every check of the node runs it again: ResNet-50's
  // 25 M weights take about 2 ms, not the 60 ms a per-element typed read took).
  const int8_t* w = weights->as<int8_t>();
  int largest = 0;
  for (int64_t k = 0; k < weights->numel(); ++k) largest = std::max(largest, w[k] < 0 ? -static_cast<int>(w[k]) : static_cast<int>(w[k]));
  if (largest > kInt16SafeWeight) {
    return refuse(cpu + " for weights beyond +-" + std::to_string(kInt16SafeWeight) + " (largest here: " +
                  std::to_string(largest) + ")");
  }
  return kYes;
}

}  // namespace

SupportDecision check_qlinear(const Graph& graph, const Node& node) {
  const bool conv = node.op_type == "QLinearConv";
  if (node.inputs.size() < 8 || node.outputs.empty()) return refuse("missing inputs");
  for (ValueId id : {node.inputs[0], node.outputs[0]}) {
    SupportDecision d = static_value(graph, id, "value");
    if (!d.supported) return d;
  }
  const DType x = graph.value(node.inputs[0]).type.dtype;
  const DType y = graph.value(node.outputs[0]).type.dtype;
  if (!eight_bit(x) || !eight_bit(y)) return refuse("operands must be uint8 or int8");
  if (!constant_of(graph, node, 1, 0, DType::kFloat32) || !constant_of(graph, node, 6, 0, DType::kFloat32)) {
    return refuse("x_scale and y_scale must be float32 scalar constants");
  }
  if (!constant_of(graph, node, 2, 0) || !constant_of(graph, node, 7, 0)) return refuse("zero points must be scalar constants");
  const ValueId w = node.inputs[3];
  if (!conv && !graph.is_constant(w)) {
    // Both operands computed: one int8 matmul with a weights zero point (dnnl_lower_quantized.cc).
    const auto& a = graph.value(node.inputs[0]).type.dims;
    const auto& b = graph.value(w).type.dims;
    const DType bt = graph.value(w).type.dtype;
    if (!eight_bit(bt) || !graph.value(w).type.is_static()) return refuse("B must be a static uint8 or int8 value");
    if (a.size() < 2 || a.size() != b.size() || a.size() != graph.value(node.outputs[0]).type.dims.size()) {
      return refuse("operands of different ranks");
    }
    if (!constant_of(graph, node, 4, 0, DType::kFloat32) || !constant_of(graph, node, 5, 0)) {
      return refuse("b_scale and b_zero_point must be scalar constants");
    }
    return int8_exact_on_this_cpu(nullptr);
  }
  if (!graph.is_constant(w)) return refuse("weights are not a constant");
  const Tensor& wt = *graph.value(w).constant;
  if (wt.dtype() != DType::kInt8) return refuse("weights are " + std::string(dtype_name(wt.dtype())) + "; oneDNN's int8 kernels take int8 weights");
  const int64_t channels = conv ? wt.shape()[0] : (wt.shape().size() == 2 ? wt.shape()[1] : -1);
  if (!conv && wt.shape().size() != 2) return refuse("B must be 2-D");
  if (!graph.is_constant(node.inputs[5]) || !all_zero(*graph.value(node.inputs[5]).constant)) {
    return refuse("weight zero points must be constant zeros (symmetric weights)");
  }
  if (!constant_of(graph, node, 4, 0, DType::kFloat32) && !constant_of(graph, node, 4, channels, DType::kFloat32)) {
    return refuse("the weight scale must be a float32 constant, one or one per output channel");
  }
  if (conv) {
    const int64_t rank = graph.value(node.inputs[0]).type.rank();
    if (rank < 3 || rank > 5) return refuse("QLinearConv of rank " + std::to_string(rank) + "; oneDNN has 1-D to 3-D");
    if (node.has_input(8) && !constant_of(graph, node, 8, channels, DType::kInt32)) return refuse("the bias must be an int32 constant");
  } else {
    const auto& a = graph.value(node.inputs[0]).type.dims;
    if (a.size() < 2) return refuse("a 1-D first operand");
  }
  return int8_exact_on_this_cpu(&wt);
}

SupportDecision check_quantize_linear(const Graph& graph, const Node& node) {
  if (node.inputs.empty() || node.outputs.empty()) return refuse("missing inputs");
  for (ValueId id : {node.inputs[0], node.outputs[0]}) {
    SupportDecision d = static_value(graph, id, "value");
    if (!d.supported) return d;
  }
  const DType x = graph.value(node.inputs[0]).type.dtype;
  const DType y = graph.value(node.outputs[0]).type.dtype;
  const bool dequantize = node.op_type == "DequantizeLinear";
  if (dequantize && graph.value(node.inputs[0]).constant) {
    return refuse("it dequantizes a constant (folded when compiling, or int8 weights that native's MatMul reads)");
  }
  if (dequantize ? !(eight_bit(x) && y == DType::kFloat32) : !(x == DType::kFloat32 && eight_bit(y))) {
    return refuse("only between float32 and uint8 / int8");
  }
  if (!constant_of(graph, node, 1, 0, DType::kFloat32)) return refuse("the scale must be a float32 scalar constant (per tensor)");
  if (node.has_input(2) && !constant_of(graph, node, 2, 0)) return refuse("the zero point must be a scalar constant");
  if (!(graph.value(node.inputs[1]).constant->double_at(0) > 0)) return refuse("the scale must be positive");
  return kYes;
}

SupportDecision check_matmul_integer(const Graph& graph, const Node& node) {
  if (node.inputs.size() < 2 || node.outputs.size() != 1) return refuse("missing inputs");
  for (ValueId id : {node.inputs[0], node.outputs[0]}) {
    SupportDecision d = static_value(graph, id, "value");
    if (!d.supported) return d;
  }
  if (!eight_bit(graph.value(node.inputs[0]).type.dtype)) return refuse("A must be uint8 or int8");
  if (graph.value(node.inputs[0]).type.rank() < 2) return refuse("a 1-D first operand");
  if (!graph.is_constant(node.inputs[1])) return refuse("B is not a constant");
  const Tensor& b = *graph.value(node.inputs[1]).constant;
  if (b.dtype() != DType::kInt8 || b.shape().size() != 2) return refuse("B must be a 2-D int8 constant");
  if (node.has_input(2) && !constant_of(graph, node, 2, 0)) return refuse("a_zero_point must be a scalar constant");
  if (node.has_input(3) && (!graph.is_constant(node.inputs[3]) || !all_zero(*graph.value(node.inputs[3]).constant))) {
    return refuse("b_zero_point must be constant zeros (symmetric weights)");
  }
  return int8_exact_on_this_cpu(&b);
}

bool scales_columns(const Graph& graph, const Node& mul) {
  if (mul.inputs.size() != 2 || mul.outputs.size() != 1) return false;
  const Value& y = graph.value(mul.outputs[0]);
  if (y.type.dtype != DType::kFloat32 || !y.type.is_static() || y.type.dims.empty()) return false;
  const ValueId s = mul.inputs[1];
  if (!graph.is_constant(s) || graph.value(s).constant->dtype() != DType::kFloat32) return false;
  const auto& d = graph.value(s).type.dims;
  const int64_t n = y.type.dims.back();
  for (size_t i = 0; i + 1 < d.size(); ++i) {
    if (d[i] != 1) return false;
  }
  return d.size() <= y.type.dims.size() && (d.empty() || d.back() == 1 || d.back() == n);
}

bool dequantizes_with_producer_parameters(const Graph& graph, const Node& dq) {
  if (dq.inputs.size() < 3 || !dq.has_input(2)) return false;
  for (const Node& producer : graph.nodes) {
    if (producer.outputs.empty() || producer.outputs[0] != dq.inputs[0]) continue;
    if (producer.op_type != "QLinearConv" && producer.op_type != "QLinearMatMul") return false;
    auto same = [&](ValueId a, ValueId b) {
      if (a == b) return true;
      if (!graph.is_constant(a) || !graph.is_constant(b)) return false;
      const Tensor& x = *graph.value(a).constant;
      const Tensor& y = *graph.value(b).constant;
      return x.numel() == 1 && y.numel() == 1 && x.dtype() == y.dtype() && x.double_at(0) == y.double_at(0);
    };
    return producer.inputs.size() >= 8 && same(producer.inputs[6], dq.inputs[1]) && same(producer.inputs[7], dq.inputs[2]);
  }
  return false;
}

}  // namespace tessera::dnnl_backend
