// Lowering of element-wise ops: activations to oneDNN eltwise (GELU's erf
// form as one eltwise_gelu_erf), and Add/Sub/Mul/Div/Max/Min to oneDNN
// binary with the broadcast operand second, both keeping the layout of
// their input (so a residual Add between two blocked Conv outputs stays
// blocked). Activations after them fuse as eltwise post-ops.
#include "backends/dnnl/dnnl_lowering.h"
#include "backends/dnnl/dnnl_op_tables.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {
void lower_elementwise(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  const Graph& g = *fused.graph;
  const Graph& region = lowering.graph();
  const ValueId final_output = fused.outputs[0];
  const std::vector<int64_t> y_dims = dims_of(region, final_output);
  Step step;
  step.node = fused.region_node;
  std::vector<memory::desc> requests;
  size_t tail_start = 0;

  if (fused.pattern == "Gelu") {
    // Body: Div(x, √2) → Erf → Add(1) → Mul(x, ·) → Mul(·, 0.5); x is the Div's first input.
    step.kind = StepKind::kEltwise;
    step.algorithm = static_cast<int32_t>(dnnl::algorithm::eltwise_gelu_erf);
    step.inputs = {lowering.slot_of(fused.region_value(node.inputs[0]))};
    requests = {memory::desc()};
    tail_start = fused.tail.size();
  } else if (std::optional<PostOp> activation = chain_activation(lowering, fused, node)) {
    step.kind = StepKind::kEltwise;
    step.algorithm = activation->algorithm;
    step.floats = {activation->alpha, activation->beta};
    step.inputs = {lowering.slot_of(fused.region_value(node.inputs[0]))};
    requests = {memory::desc()};
  } else if (const BinaryOp* binary = node.domain.empty() ? find_binary_op(node.op_type) : nullptr) {
    if (node.inputs.size() != 2) lowering.unsupported(node, "only two operands");
    ValueId first = fused.region_value(node.inputs[0]);
    ValueId second = fused.region_value(node.inputs[1]);
    const std::vector<int64_t> out_dims = g.value(node.outputs[0]).type.dims;
    if (dims_of(region, first) != out_dims) {
      if (!binary->commutative || dims_of(region, second) != out_dims) {
        lowering.unsupported(node, "the first operand broadcasts");
      }
      std::swap(first, second);
    }
    std::vector<int64_t> second_dims = dims_of(region, second);
    int32_t second_slot;
    if (lowering.is_constant_value(second)) {
      while (second_dims.size() < out_dims.size()) second_dims.insert(second_dims.begin(), 1);
      second_slot = lowering.constant_slot(second_dims, ConstantTransform::kNone, {second});
    } else {
      if (second_dims.size() != out_dims.size()) lowering.unsupported(node, "a computed operand of lower rank");
      second_slot = lowering.slot_of(second);
    }
    step.kind = StepKind::kBinary;
    step.algorithm = static_cast<int32_t>(binary->algorithm);
    const int32_t first_slot = lowering.slot_of(first);
    step.inputs = {first_slot, second_slot};
    // Same-shape operands meet in the first one's layout; a broadcast one stays plain.
    const memory::desc second_request =
        second_dims == out_dims ? lowering.desc(first_slot) : plain_desc(second_dims);
    requests = {memory::desc(), second_request};
  } else {
    lowering.unsupported(node, node.op_type + " is not lowered by the oneDNN backend");
  }
  for (size_t t = tail_start; t < fused.tail.size(); ++t) {
    std::optional<PostOp> activation = chain_activation(lowering, fused, *fused.tail[t]);
    if (!activation) lowering.unsupported(*fused.tail[t], "cannot fuse " + fused.tail[t]->op_type);
    step.post_ops.push_back(*activation);
  }
  const memory::desc out_request = step.kind == StepKind::kEltwise ? memory::desc() : any_desc(y_dims);
  // Eltwise writes in its input's layout: its output role is the input's.
  lowering.add_step(std::move(step), requests,
                    out_request == memory::desc() ? lowering.desc(lowering.slot_of(fused.region_value(node.inputs[0])))
                                                  : out_request,
                    final_output, y_dims);
}

}  // namespace tessera::dnnl_backend
