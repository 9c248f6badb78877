// Lowering of MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool to
// oneDNN's pooling_v2. The source keeps the layout its producer chose (a
// blocked Conv output stays blocked), and the destination layout is left
// to oneDNN, which picks the source's; ceil_mode becomes extra end padding.
// MaxPool may read and write 8-bit values (what passes/fold_qdq.cc makes of a QDQ MaxPool).
#include "backends/dnnl/dnnl_lowering.h"
#include "backends/dnnl/dnnl_geometry.h"
#include "backends/dnnl/dnnl_op_tables.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {

void lower_pooling(Lowering& lowering, const FusedNode& fused) {
  const Node& node = *fused.node;
  if (!fused.tail.empty()) lowering.unsupported(node, "nothing fuses into pooling");
  if (node.has_output(1)) lowering.unsupported(node, "the Indices output");
  const PoolingGeometry geometry = pooling_geometry(*fused.graph, node);
  if (!geometry.refusal.empty()) lowering.unsupported(node, geometry.refusal);
  const ValueId x = fused.region_value(node.inputs[0]);
  const std::vector<int64_t> y_dims = dims_of(lowering.graph(), fused.outputs[0]);

  Step step;
  step.kind = StepKind::kPooling;
  step.node = fused.region_node;
  const PoolingOp* row = find_pooling_op(node.op_type);
  if (!row) lowering.unsupported(node, node.op_type + " is not a pooling op");
  step.algorithm = static_cast<int32_t>(geometry.include_padding ? row->include_padding_algorithm : row->algorithm);
  // ints: strides, kernel, dilations (from 0), begin paddings, end paddings.
  step.ints = geometry.strides;
  step.ints.insert(step.ints.end(), geometry.kernel.begin(), geometry.kernel.end());
  for (int64_t d : geometry.dilations) step.ints.push_back(d - 1);
  step.ints.insert(step.ints.end(), geometry.pad_begin.begin(), geometry.pad_begin.end());
  step.ints.insert(step.ints.end(), geometry.pad_end.begin(), geometry.pad_end.end());
  step.inputs = {lowering.slot_of(x)};
  // 8-bit max pooling (a folded QDQ MaxPool) writes the source's type; everything else float32.
  const memory::data_type source_type = lowering.desc(step.inputs[0]).data_type();
  const bool eight_bit = source_type == memory::data_type::u8 || source_type == memory::data_type::s8;
  lowering.add_step(std::move(step), {memory::desc()}, any_desc(y_dims, eight_bit ? source_type : memory::data_type::f32),
                    fused.outputs[0], y_dims);
}

}  // namespace tessera::dnnl_backend
