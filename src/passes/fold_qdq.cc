#include "passes/fold_qdq.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>

namespace tessera {
namespace {

class QdqFolder {
 public:
  QdqFolder(Graph& graph, std::vector<QdqFold>* folds) : graph_(graph), folds_(folds), constants_(graph) {
    readers_.assign(graph.values.size(), 0);
    producer_.assign(graph.values.size(), -1);
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      const Node& node = graph.nodes[i];
      for (ValueId in : node.inputs) {
        if (in != kNoValue) ++readers_[static_cast<size_t>(in)];
      }
      for (ValueId out : node.outputs) {
        if (out != kNoValue) producer_[static_cast<size_t>(out)] = static_cast<int64_t>(i);
      }
    }
    for (ValueId out : graph.outputs) is_output_[out] = true;
  }

  int run() {
    int folded = 0;
    std::vector<char> erase(graph_.nodes.size(), 0);
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (erase[i]) continue;
      const Node& q = graph_.nodes[i];
      if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.inputs.size() < 3 || !q.has_input(2)) continue;
      if (!scalar(q.inputs[1]) || !scalar(q.inputs[2]) || q.outputs.size() != 1) continue;
      // Walk back: [Relu | Clip] then Conv / MatMul.
      ValueId y = q.inputs[0];
      if (!single_inner(y)) continue;
      int64_t p = producer_[static_cast<size_t>(y)];
      if (p < 0) continue;
      if (fold_max_pool(static_cast<size_t>(p), q)) {
        erase[i] = 1;
        ++folded;
        continue;
      }
      int64_t activation = -1;
      if (graph_.nodes[static_cast<size_t>(p)].op_type == "Relu" || graph_.nodes[static_cast<size_t>(p)].op_type == "Clip") {
        activation = p;
        y = graph_.nodes[static_cast<size_t>(p)].inputs[0];
        if (!single_inner(y)) continue;
        p = producer_[static_cast<size_t>(y)];
        if (p < 0) continue;
      }
      Node& op = graph_.nodes[static_cast<size_t>(p)];
      if (!op.domain.empty() || (op.op_type != "Conv" && op.op_type != "MatMul")) continue;
      if (activation >= 0 && !activation_folds(graph_.nodes[static_cast<size_t>(activation)], q)) continue;
      std::optional<std::vector<ValueId>> inputs =
          op.op_type == "Conv" ? conv_inputs(op, q) : matmul_inputs(op, q);
      if (!inputs) continue;
      // The op becomes the quantized one, in place (its position keeps the order topological).
      op.op_type = op.op_type == "Conv" ? "QLinearConv" : "QLinearMatMul";
      op.inputs = *inputs;
      op.outputs = {q.outputs[0]};
      op.opset = std::max(op.opset, 10);
      producer_[static_cast<size_t>(q.outputs[0])] = p;
      erase[i] = 1;
      if (activation >= 0) erase[static_cast<size_t>(activation)] = 1;
      if (folds_) {
        if (activation >= 0) {
          const Node& act = graph_.nodes[static_cast<size_t>(activation)];
          folds_->push_back({act.name, act.op_type, op.name});
        }
        folds_->push_back({q.name, q.op_type, op.name});
      }
      ++folded;
    }
    // Products left in float32 (no QuantizeLinear after them: a classifier's Gemm, a model output).
    std::map<size_t, std::vector<Node>> after;
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      std::vector<Node> added;
      if (!erase[i] && fold_float_product(i, &added)) {
        after[i] = std::move(added);
        ++folded;
      }
    }
    std::vector<Node> kept;
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (!erase[i]) kept.push_back(std::move(graph_.nodes[i]));
      auto it = after.find(i);
      if (it != after.end()) {
        for (Node& n : it->second) kept.push_back(std::move(n));
      }
    }
    graph_.nodes = std::move(kept);
    return folded;
  }

 private:
  const Tensor* constant(ValueId id) const { return constants_.find(id); }
  bool scalar(ValueId id) const {
    const Tensor* t = constant(id);
    return t && t->numel() == 1 && t->shape().size() <= 1;
  }
  /// An intermediate the chain may swallow: one reader, not a graph output.
  bool single_inner(ValueId id) const {
    return id != kNoValue && readers_[static_cast<size_t>(id)] == 1 && !is_output_.count(id);
  }

  /// The quantized type's lowest and highest values.
  static std::pair<double, double> type_range(const Tensor& zero_point) {
    if (zero_point.dtype() == DType::kInt8) return {-128, 127};
    return {0, 255};
  }

  bool activation_folds(const Node& act, const Node& q) const {
    const Tensor& zp = *constant(q.inputs[2]);
    if (zp.dtype() != DType::kUInt8 && zp.dtype() != DType::kInt8) return false;
    const auto [lo, hi] = type_range(zp);
    const double z = zp.double_at(0);
    const double s = constant(q.inputs[1])->double_at(0);
    if (z != lo || !(s > 0)) return false;  // the saturation must be exactly max(., 0)
    if (act.op_type == "Relu") return true;
    // Clip(0, max): the lower bound 0 and an upper bound the quantized range does not pass.
    double clip_lo = -std::numeric_limits<double>::infinity(), clip_hi = std::numeric_limits<double>::infinity();
    if (act.opset < 11) {
      clip_lo = act.attrs.get_float_or("min", -std::numeric_limits<float>::max());
      clip_hi = act.attrs.get_float_or("max", std::numeric_limits<float>::max());
    } else {
      if (act.has_input(1)) {
        if (!scalar(act.inputs[1])) return false;
        clip_lo = constant(act.inputs[1])->double_at(0);
      }
      if (act.has_input(2)) {
        if (!scalar(act.inputs[2])) return false;
        clip_hi = constant(act.inputs[2])->double_at(0);
      }
    }
    return clip_lo == 0.0 && s * (hi - z) <= clip_hi + 0.5 * s;
  }

  /// x_q, x_scale, x_zp of a DequantizeLinear feeding `value` (per-tensor), else nullopt.
  std::optional<std::vector<ValueId>> dequantized(ValueId value, bool allow_vector_scale, bool constant_data) const {
    if (value == kNoValue || is_output_.count(value)) return std::nullopt;
    const int64_t p = producer_[static_cast<size_t>(value)];
    if (p < 0) return std::nullopt;
    const Node& dq = graph_.nodes[static_cast<size_t>(p)];
    if (dq.op_type != "DequantizeLinear" || !dq.domain.empty() || dq.inputs.size() < 3 || !dq.has_input(2)) return std::nullopt;
    const Tensor* scale = constant(dq.inputs[1]);
    const Tensor* zp = constant(dq.inputs[2]);
    if (!scale || !zp || scale->dtype() != DType::kFloat32) return std::nullopt;
    if (constant_data && !constant(dq.inputs[0])) return std::nullopt;
    if (scale->numel() != 1 || zp->numel() != 1) {
      if (!allow_vector_scale || scale->shape().size() != 1 || zp->shape() != scale->shape()) return std::nullopt;
    }
    return std::vector<ValueId>{dq.inputs[0], dq.inputs[1], dq.inputs[2]};
  }
  /// Q(MaxPool(DQ(x))) with the same scale and zero point on both sides is MaxPool(x) on the 8-bit
  /// values: quantization is monotonic, so the max commutes with it exactly.
  bool fold_max_pool(size_t p, const Node& q) {
    Node& pool = graph_.nodes[p];
    if (pool.op_type != "MaxPool" || !pool.domain.empty() || pool.outputs.size() != 1 || pool.inputs.size() != 1) return false;
    if (pool.opset < 12) return false;  // 8-bit MaxPool exists from opset 12
    const ValueId dq_out = pool.inputs[0];
    const int64_t d = dq_out == kNoValue ? -1 : producer_[static_cast<size_t>(dq_out)];
    if (d < 0 || is_output_.count(dq_out)) return false;
    const Node& dq = graph_.nodes[static_cast<size_t>(d)];
    if (dq.op_type != "DequantizeLinear" || !dq.domain.empty() || dq.inputs.size() < 3 || !dq.has_input(2)) return false;
    if (!scalar(dq.inputs[1]) || !scalar(dq.inputs[2])) return false;
    auto same = [&](ValueId a, ValueId b) {
      const Tensor& x = *constant(a);
      const Tensor& y = *constant(b);
      return x.dtype() == y.dtype() && x.double_at(0) == y.double_at(0);
    };
    if (!same(dq.inputs[1], q.inputs[1]) || !same(dq.inputs[2], q.inputs[2])) return false;
    pool.inputs = {dq.inputs[0]};
    pool.outputs = {q.outputs[0]};
    producer_[static_cast<size_t>(q.outputs[0])] = static_cast<int64_t>(p);
    if (folds_) folds_->push_back({q.name, q.op_type, pool.name});
    return true;
  }

  std::optional<std::vector<ValueId>> conv_inputs(const Node& conv, const Node& q) const {
    auto x = dequantized(conv.inputs[0], false, false);
    auto w = dequantized(conv.inputs.size() > 1 ? conv.inputs[1] : kNoValue, true, true);
    if (!x || !w) return std::nullopt;
    const Tensor& wq = *constant((*w)[0]);
    if (wq.dtype() != DType::kInt8 && wq.dtype() != DType::kUInt8) return std::nullopt;
    const Tensor& w_scale = *constant((*w)[1]);
    if (w_scale.numel() != 1) {
      // Per output channel only (axis 0 of the weights).
      const Node& dq = graph_.nodes[static_cast<size_t>(producer_[static_cast<size_t>(conv.inputs[1])])];
      if (dq.attrs.get_int_or("axis", 1) != 0 || wq.shape().empty() || w_scale.numel() != wq.shape()[0]) return std::nullopt;
    }
    std::vector<ValueId> inputs = {(*x)[0], (*x)[1], (*x)[2], (*w)[0], (*w)[1], (*w)[2], q.inputs[1], q.inputs[2]};
    if (conv.has_input(2)) {
      auto b = dequantized(conv.inputs[2], true, true);
      if (!b) return std::nullopt;
      const Tensor& bq = *constant((*b)[0]);
      const Tensor& b_scale = *constant((*b)[1]);
      const Tensor& b_zp = *constant((*b)[2]);
      if (bq.dtype() != DType::kInt32) return std::nullopt;
      for (int64_t k = 0; k < b_zp.numel(); ++k) {
        if (b_zp.int_at(k) != 0) return std::nullopt;
      }
      // The bias must be on the accumulator's scale: x_scale * w_scale per channel.
      const double xs = constant((*x)[1])->double_at(0);
      const int64_t channels = bq.numel();
      if (b_scale.numel() != 1 && b_scale.numel() != channels) return std::nullopt;
      for (int64_t c = 0; c < channels; ++c) {
        const double expected = xs * w_scale.double_at(w_scale.numel() == 1 ? 0 : c);
        const double actual = b_scale.double_at(b_scale.numel() == 1 ? 0 : c);
        if (std::fabs(actual - expected) > 1e-6 * std::fabs(expected)) return std::nullopt;
      }
      inputs.push_back((*b)[0]);
    }
    return inputs;
  }

  std::optional<std::vector<ValueId>> matmul_inputs(const Node& matmul, const Node& q) const {
    auto a = dequantized(matmul.inputs[0], false, false);
    if (!a) return std::nullopt;
    const bool b_constant = matmul.inputs.size() > 1 && producer_is_constant_dq(matmul.inputs[1]);
    auto b = dequantized(matmul.inputs.size() > 1 ? matmul.inputs[1] : kNoValue, b_constant, b_constant);
    if (!b) return std::nullopt;
    if (constant((*b)[1])->numel() != 1) {
      // Per column of a 2-D B (QLinearMatMul's per-column scales).
      const Tensor* bq = constant((*b)[0]);
      const Node& dq = graph_.nodes[static_cast<size_t>(producer_[static_cast<size_t>(matmul.inputs[1])])];
      if (!bq || bq->shape().size() != 2 || dq.attrs.get_int_or("axis", 1) != 1 ||
          constant((*b)[1])->numel() != bq->shape()[1]) {
        return std::nullopt;
      }
    }
    return std::vector<ValueId>{(*a)[0], (*a)[1], (*a)[2], (*b)[0], (*b)[1], (*b)[2], q.inputs[1], q.inputs[2]};
  }

  /// Gemm(DQ(x), DQ(w), C) or MatMul(DQ(x), DQ(w)) read as float32 and left in float32 becomes
  ///   MatMulInteger(x_q, w_q, x_zp, w_zp) -> Cast(float) -> Mul(x_scale * w_scale) [-> Add(C)],
  /// the same product accumulated exactly in int32 and scaled once (w transposed when transB).
  /// Gemm needs alpha 1, beta 1 and no transA; w is a constant 2-D int8/uint8 tensor with a scale
  /// per tensor or per output column. The new nodes go to `*after`, to follow the product.
  bool fold_float_product(size_t p, std::vector<Node>* after) {
    Node& op = graph_.nodes[p];
    const bool gemm = op.op_type == "Gemm";
    if (!op.domain.empty() || (!gemm && op.op_type != "MatMul") || op.inputs.size() < 2 || op.outputs.size() != 1) return false;
    if (gemm && (op.attrs.get_float_or("alpha", 1.0f) != 1.0f || op.attrs.get_int_or("transA", 0) != 0)) return false;
    if (gemm && op.has_input(2) && op.attrs.get_float_or("beta", 1.0f) != 1.0f) return false;
    const bool trans_b = gemm && op.attrs.get_int_or("transB", 0) != 0;
    auto x = dequantized(op.inputs[0], false, false);
    auto w = dequantized(op.inputs[1], true, true);
    if (!x || !w) return false;
    const Tensor& x_zp = *constant((*x)[2]);
    const Tensor& wq = *constant((*w)[0]);
    const Tensor& w_scale = *constant((*w)[1]);
    if ((x_zp.dtype() != DType::kUInt8 && x_zp.dtype() != DType::kInt8) || constant((*x)[1])->dtype() != DType::kFloat32) return false;
    if ((wq.dtype() != DType::kInt8 && wq.dtype() != DType::kUInt8) || wq.shape().size() != 2) return false;
    const int64_t n = trans_b ? wq.shape()[0] : wq.shape()[1];
    const int64_t k = trans_b ? wq.shape()[1] : wq.shape()[0];
    if (w_scale.numel() != 1) {
      const Node& dq = graph_.nodes[static_cast<size_t>(producer_[static_cast<size_t>(op.inputs[1])])];
      int64_t axis = dq.attrs.get_int_or("axis", 1);
      if (axis < 0) axis += 2;
      if (axis != (trans_b ? 0 : 1) || w_scale.numel() != n) return false;
    }
    // B as [K, N].
    ValueId b = (*w)[0];
    if (trans_b) {
      Tensor t(wq.dtype(), {k, n});
      const auto* src = static_cast<const uint8_t*>(wq.data());
      auto* dst = static_cast<uint8_t*>(t.data());
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) dst[c * n + r] = src[r * k + c];
      }
      b = graph_.add_constant(graph_.unique_value_name(graph_.value((*w)[0]).name + "_transposed"), std::move(t));
    }
    // The one float32 multiplier per column: x_scale * w_scale.
    const double xs = constant((*x)[1])->double_at(0);
    Tensor scales(DType::kFloat32, {w_scale.numel() == 1 ? 1 : n});
    for (int64_t c = 0; c < scales.numel(); ++c) scales.as<float>()[c] = static_cast<float>(xs * w_scale.double_at(c));
    const std::string base = graph_.value(op.outputs[0]).name;
    const ValueId scale_id = graph_.add_constant(graph_.unique_value_name(base + "_scale"), std::move(scales));
    const ValueId acc = graph_.add_value(graph_.unique_value_name(base + "_int32"), TensorType{DType::kInt32});
    const ValueId acc_float = graph_.add_value(graph_.unique_value_name(base + "_int32_float"), TensorType{DType::kFloat32});
    const ValueId y = op.outputs[0];
    const ValueId c = gemm && op.has_input(2) ? op.inputs[2] : kNoValue;
    const int opset = std::max(op.opset, 13);
    auto make = [&](std::string suffix, std::string type, std::vector<ValueId> inputs, ValueId output) {
      Node node;
      node.name = op.name + "/" + std::move(suffix);
      node.op_type = std::move(type);
      node.opset = opset;
      node.inputs = std::move(inputs);
      node.outputs = {output};
      return node;
    };
    Node cast = make("to_float", "Cast", {acc}, acc_float);
    cast.attrs.set("to", Attribute::of_int(static_cast<int64_t>(1)));  // FLOAT
    after->push_back(std::move(cast));
    if (c == kNoValue) {
      after->push_back(make("scale", "Mul", {acc_float, scale_id}, y));
    } else {
      const ValueId scaled = graph_.add_value(graph_.unique_value_name(base + "_scaled"), TensorType{DType::kFloat32});
      after->push_back(make("scale", "Mul", {acc_float, scale_id}, scaled));
      after->push_back(make("bias", "Add", {scaled, c}, y));
    }
    op.op_type = "MatMulInteger";
    op.opset = std::max(op.opset, 10);
    op.attrs = AttributeMap();
    op.inputs = {(*x)[0], b, (*x)[2], (*w)[2]};
    op.outputs = {acc};
    return true;
  }

  bool producer_is_constant_dq(ValueId value) const {
    const int64_t p = value == kNoValue ? -1 : producer_[static_cast<size_t>(value)];
    return p >= 0 && graph_.nodes[static_cast<size_t>(p)].op_type == "DequantizeLinear" &&
           constant(graph_.nodes[static_cast<size_t>(p)].inputs[0]) != nullptr;
  }

  Graph& graph_;
  std::vector<QdqFold>* folds_;
  std::vector<int> readers_;
  std::vector<int64_t> producer_;
  ConstantOperands constants_;
  std::map<ValueId, bool> is_output_;
};

}  // namespace

int fold_qdq(Graph& graph, std::vector<QdqFold>* folds) { return QdqFolder(graph, folds).run(); }

}  // namespace tessera
