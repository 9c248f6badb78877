// Lowering of MatMul and Gemm to oneDNN's matmul, with a constant Add as
// the bias and activations (GELU included) as eltwise post-ops; in bfloat16
// (float32 accumulation) where the core marks the node. Constant
// weights take the packed layout oneDNN chooses, reordered once at load.
#include "backends/dnnl/dnnl_lowering.h"
#include "backends/dnnl/dnnl_op_tables.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {
namespace {

std::vector<int64_t> with_leading_ones(std::vector<int64_t> dims, size_t rank) {
  while (dims.size() < rank) dims.insert(dims.begin(), 1);
  return dims;
}

PostOp gelu_post_op() {
  PostOp p;
  p.kind = PostOpKind::kEltwise;
  p.algorithm = static_cast<int32_t>(dnnl::algorithm::eltwise_gelu_erf);
  return p;
}

}  // namespace

void lower_matmul(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  const Graph& g = *fused.graph;
  const Graph& region = lowering.graph();
  const bool gemm = node.op_type == "Gemm";
  const ValueId a = fused.region_value(node.inputs[0]);
  const ValueId b = fused.region_value(node.inputs[1]);
  std::vector<int64_t> y_dims = g.value(node.outputs[0]).type.dims;
  const size_t rank = y_dims.size();
  const std::vector<int64_t> a_dims = dims_of(region, a);
  const std::vector<int64_t> b_dims = dims_of(region, b);
  if (a_dims.size() != rank) lowering.unsupported(node, "the first operand must have the output's rank");
  const int64_t n = y_dims.back();

  Step step;
  step.kind = StepKind::kMatMul;
  step.node = fused.region_node;
  int32_t b_slot;
  std::vector<int64_t> weight_dims = with_leading_ones(b_dims, rank);
  int32_t bias_slot = -1;
  std::vector<int64_t> bias_dims(rank, 1);
  bias_dims.back() = n;
  // With constant 2-D weights, the source's leading dims collapse into rows:
  // a 2-D matmul whose weights oneDNN packs (much faster than a 3-D one).
  const bool collapse = !gemm && rank > 2 && lowering.is_constant_value(b) && b_dims.size() == 2;
  if (collapse) {
    step.ints = {1};
    weight_dims = b_dims;
    bias_dims = {1, n};
  }
  if (gemm) {
    if (node.attrs.get_int_or("transA", 0) != 0) lowering.unsupported(node, "Gemm with transA");
    const bool trans_b = node.attrs.get_int_or("transB", 0) != 0;
    const float alpha = node.attrs.get_float_or("alpha", 1.0f);
    const float beta = node.attrs.get_float_or("beta", 1.0f);
    if (trans_b || alpha != 1.0f) {
      if (!lowering.is_constant_value(b)) lowering.unsupported(node, "transB or alpha needs a constant B");
      weight_dims = trans_b ? std::vector<int64_t>{b_dims[1], b_dims[0]} : b_dims;
      b_slot = lowering.constant_slot(weight_dims, trans_b ? ConstantTransform::kTranspose2d : ConstantTransform::kScaled, {b},
                                      {alpha});
    } else {
      b_slot = lowering.is_constant_value(b) ? lowering.constant_slot(weight_dims, ConstantTransform::kNone, {b})
                                             : lowering.slot_of(b);
    }
    if (node.has_input(2)) {
      const ValueId c = fused.region_value(node.inputs[2]);
      const std::vector<int64_t> c_dims = dims_of(region, c);
      if (lowering.is_constant_value(c) && shape_numel(c_dims) == n && (c_dims.empty() || c_dims.back() == n)) {
        bias_slot = lowering.constant_slot(bias_dims, ConstantTransform::kScaled, {c}, {beta});
      } else if (lowering.is_constant_value(c) && c_dims == y_dims) {
        PostOp add;
        add.kind = PostOpKind::kBinary;
        add.algorithm = static_cast<int32_t>(find_binary_op("Add")->algorithm);
        add.slot = lowering.constant_slot(c_dims, ConstantTransform::kScaled, {c}, {beta});
        step.post_ops.push_back(add);
      } else if (beta == 1.0f && c_dims.size() == rank) {
        PostOp add;
        add.kind = PostOpKind::kBinary;
        add.algorithm = static_cast<int32_t>(find_binary_op("Add")->algorithm);
        add.slot = lowering.slot_of(c);
        step.post_ops.push_back(add);
      } else {
        lowering.unsupported(node, "Gemm's C cannot be fused");
      }
    }
  } else if (lowering.is_constant_value(b)) {
    b_slot = lowering.constant_slot(weight_dims, ConstantTransform::kNone, {b});
  } else {
    if (b_dims.size() != rank) lowering.unsupported(node, "a non-constant second operand must have the output's rank");
    b_slot = lowering.slot_of(b);
  }

  ValueId chain = node.outputs[0];
  for (size_t t = 0; t < fused.tail.size(); ++t) {
    if (std::optional<PostOp> swish = chain_gated_activation(fused, t, chain)) {
      step.post_ops.push_back(*swish);
      chain = fused.tail[++t]->outputs[0];
      continue;
    }
    const Node& next = *fused.tail[t];
    if (next.op_type == "Add" && step.post_ops.empty() && bias_slot < 0) {
      const ValueId other = fused.region_value(next.inputs[0] == chain ? next.inputs[1] : next.inputs[0]);
      const std::vector<int64_t> other_dims = dims_of(region, other);
      if (!lowering.is_constant_value(other) || shape_numel(other_dims) != n || other_dims.empty() || other_dims.back() != n) {
        lowering.unsupported(next, "only a constant bias over the last axis fuses into a MatMul");
      }
      bias_slot = lowering.constant_slot(bias_dims, ConstantTransform::kNone, {other});
    } else if (next.op_type == "Div" && fused.pattern.find("Gelu") != std::string::npos) {
      // The rest of the tail is the erf form of GELU (Div, Erf, Add, Mul, Mul).
      step.post_ops.push_back(gelu_post_op());
      break;
    } else if (std::optional<PostOp> activation = chain_activation(lowering, fused, next)) {
      step.post_ops.push_back(*activation);
    } else {
      lowering.unsupported(next, "cannot fuse " + next.op_type + " into a matmul");
    }
    chain = next.outputs[0];
  }

  // bf16 (where the core allows it): bf16 operands, float32 accumulation, bias and post-ops.
  const bool bf16 = lowering.bf16(fused.region_node);
  const memory::data_type compute_type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::data_type output_type = bf16 ? lowering.compute_output_type(fused.outputs[0]) : memory::data_type::f32;
  // A computed operand keeps its layout (in bf16: converted, plain when it was plain).
  auto keep_layout = [&](int32_t slot) {
    if (!bf16) return memory::desc();
    const memory::desc& current = lowering.desc(slot);
    if (current.data_type() == memory::data_type::bf16) return current;
    return is_plain(current) ? plain_desc(lowering.dims(slot), memory::data_type::bf16)
                             : any_desc(lowering.dims(slot), memory::data_type::bf16);
  };
  step.inputs = {lowering.slot_of(a), b_slot};
  std::vector<memory::desc> requests = {keep_layout(step.inputs[0]), any_desc(weight_dims, compute_type)};
  if (!lowering.is_constant_value(b) && !(gemm && (node.attrs.get_int_or("transB", 0) || node.attrs.get_float_or("alpha", 1.0f) != 1.0f))) {
    requests[1] = keep_layout(b_slot);
  }
  if (bias_slot >= 0) {
    step.inputs.push_back(bias_slot);
    requests.push_back(any_desc(bias_dims));
  }
  lowering.add_step(std::move(step), requests, any_desc(y_dims, output_type), fused.outputs[0], y_dims);
}

}  // namespace tessera::dnnl_backend
