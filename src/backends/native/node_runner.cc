#include "backends/native/node_runner.h"

#include "ir/error.h"

namespace tessera::native {

void run_node(const CompiledNode& cn, ValueStore& store, ThreadPool& pool) {
  const Node& node = *cn.node;
  std::vector<const TensorView*> inputs(node.inputs.size(), nullptr);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] != kNoValue) inputs[i] = &store.get(node.inputs[i]);
  }
  std::vector<TensorView*> outputs(node.outputs.size(), nullptr);
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] != kNoValue) outputs[i] = &store.output(node.outputs[i]);
  }
  if (!cn.outputs_static) {
    std::vector<TensorType> input_types(inputs.size());
    std::vector<const TensorType*> type_ptrs(inputs.size(), nullptr);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!inputs[i]) continue;
      input_types[i] = TensorType::make(inputs[i]->dtype, inputs[i]->shape);
      type_ptrs[i] = &input_types[i];
    }
    std::vector<TensorType> output_types(node.outputs.size());
    InferContext ctx(node, type_ptrs, inputs, &output_types);
    run_shape_inference(*cn.schema, ctx);  // checks the size of every shape computed from values
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i] || outputs[i]->data) continue;
      const TensorType& t = output_types[i];
      if (t.is_static()) {
        outputs[i]->dtype = t.dtype;
        outputs[i]->shape = t.dims;
        store.allocate(node.outputs[i]);
      }
    }
  }
  KernelContext ctx(node, std::move(inputs), outputs, pool, cn.state.get(),
                    [&](size_t i, TensorView&) { store.allocate(node.outputs[i]); });
  cn.kernel->run(ctx);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] && !outputs[i]->data && outputs[i]->numel() != 0) {
      throw_internal_error(node.describe(), ": kernel left output ", i, " unallocated");
    }
  }
}

}  // namespace tessera::native
