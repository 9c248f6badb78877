#include "backends/native/node_runner.h"

#include "ir/error.h"
#include "ir/small_vector.h"

namespace tessera::native {

void mark_boxed_values(CompiledNode& cn, const Graph& graph) {
  const Node& node = *cn.node;
  cn.boxed_inputs.clear();
  cn.boxed_outputs.clear();
  bool any = false;
  for (ValueId id : node.inputs) any |= id != kNoValue && !graph.value(id).type.is_tensor();
  for (ValueId id : node.outputs) any |= id != kNoValue && !graph.value(id).type.is_tensor();
  if (!any) return;
  for (ValueId id : node.inputs) cn.boxed_inputs.push_back(id != kNoValue && !graph.value(id).type.is_tensor());
  for (ValueId id : node.outputs) cn.boxed_outputs.push_back(id != kNoValue && !graph.value(id).type.is_tensor());
}

bool reads_strided_input(const CompiledNode& cn, size_t index, const TensorView& view) {
  const Node& node = *cn.node;
  if (cn.schema->reads_shapes_only || node.op_type == "Concat") return node.domain.empty();
  if (node.op_type != "MatMul" || !node.domain.empty() || index != 1 || node.attrs.has("tessera_int8_scales")) return false;
  // Batches at any stride; each [rows, columns] matrix contiguous.
  const size_t rank = view.shape.size();
  if (rank < 2 || view.strides.size() != rank) return rank >= 2 && view.strides.empty();
  const int64_t rows = view.shape[rank - 2], columns = view.shape[rank - 1];
  return (columns == 1 || view.strides[rank - 1] == 1) && (rows == 1 || view.strides[rank - 2] == columns);
}

namespace {

/// The node's output types at the shapes of the inputs it got (shape inference checks every size it
/// computes, and that the inputs fit the op: a broadcast that cannot happen is a user error).
std::vector<TensorType> infer_outputs(const CompiledNode& cn, const std::vector<const TensorView*>& inputs) {
  std::vector<TensorType> input_types(inputs.size());
  std::vector<const TensorType*> type_ptrs(inputs.size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) continue;
    input_types[i] = TensorType::make(inputs[i]->dtype, inputs[i]->shape);
    type_ptrs[i] = &input_types[i];
  }
  std::vector<TensorType> output_types(cn.node->outputs.size());
  InferContext ctx(*cn.node, type_ptrs, inputs, &output_types);
  run_shape_inference(*cn.schema, ctx);
  return output_types;
}

}  // namespace

/// A node's input or output pointers: in place for up to 8 of them (every run of a node allocated
/// four small vectors for these, most of a small Loop trip's allocations), else on the heap.
template <typename T>
using NodePointers = SmallVector<T*, 8>;

template <typename T>
PointerSpan<T> span_of(const NodePointers<T>& pointers) {
  return {pointers.data(), pointers.size()};
}

void run_node(const CompiledNode& cn, ValueStore& store, ThreadPool& pool) {
  const Node& node = *cn.node;
  const bool boxed = !cn.boxed_inputs.empty() || !cn.boxed_outputs.empty();
  NodePointers<const TensorView> inputs(node.inputs.size(), nullptr);
  NodePointers<BoxedValue> boxed_inputs(boxed ? node.inputs.size() : 0, nullptr);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue) continue;
    if (boxed && cn.boxed_inputs[i]) {
      boxed_inputs[i] = &store.boxed(node.inputs[i]);
    } else {
      inputs[i] = &store.get(node.inputs[i]);
    }
  }
  NodePointers<TensorView> outputs(node.outputs.size(), nullptr);
  NodePointers<BoxedValue> boxed_outputs(boxed ? node.outputs.size() : 0, nullptr);
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kNoValue) continue;
    if (boxed && cn.boxed_outputs[i]) {
      boxed_outputs[i] = &store.boxed(node.outputs[i]);
      *boxed_outputs[i] = BoxedValue{};
    } else {
      outputs[i] = &store.output(node.outputs[i]);
    }
  }
  // A node with sequence or optional values has its kernel allocate its tensor
  // outputs (their shapes follow the boxed values' contents).
  if (cn.check_static_outputs && !boxed) {
    const std::vector<TensorType> output_types = infer_outputs(cn, inputs.to_vector());
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i] || !output_types[i].is_static() || output_types[i].dims == outputs[i]->shape) continue;
      std::string shapes;
      for (size_t k = 0; k < inputs.size(); ++k) {
        shapes += (shapes.empty() ? "" : ", ") + (inputs[k] ? shape_to_string(inputs[k]->shape) : "-");
      }
      throw_user_error(node.describe(), ": at input shapes (", shapes, ") output '", cn.output_names[i], "' is ",
                       shape_to_string(output_types[i].dims), ", but the model fixes it at ",
                       shape_to_string(outputs[i]->shape),
                       ": these input dims do not fit what the model's shapes assume (a broadcast or a size fixed "
                       "elsewhere in the model)");
    }
  }
  if (!cn.outputs_static && !boxed && !cn.kernel->allocates_outputs) {
    const std::vector<TensorType> output_types = infer_outputs(cn, inputs.to_vector());
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!outputs[i]) continue;
      const TensorType& t = output_types[i];
      if (outputs[i]->data) {
        // A caller's buffer (I/O binding): it must be what the node makes at these shapes.
        if (t.is_static() && outputs[i]->shape != t.dims) {
          throw_user_error("output '", i < cn.output_names.size() ? cn.output_names[i] : std::to_string(i), "' is ",
                           shape_to_string(t.dims), " at these input shapes, but the buffer bound to it is ",
                           shape_to_string(outputs[i]->shape), " (", node.describe(), ")");
        }
        continue;
      }
      if (t.is_static()) {
        outputs[i]->dtype = t.dtype;
        outputs[i]->shape = t.dims;
        if (i == 0 && cn.kernel->output_aliases_input && inputs[0] && inputs[0]->dtype == t.dtype &&
            store.alias(node.outputs[0], node.inputs[0])) {
          continue;
        }
        store.allocate(node.outputs[i]);
      }
    }
  }
  KernelContext ctx(node, span_of(inputs), span_of(outputs), pool, cn.state.get(),
                    [&](size_t i, TensorView&) { store.allocate(node.outputs[i]); }, span_of(boxed_inputs),
                    span_of(boxed_outputs));
  if (!cn.movable_inputs.empty()) ctx.set_movable_inputs(cn.movable_inputs);
  cn.kernel->run(ctx);
  for (size_t i = 0; i < ctx.num_outputs(); ++i) {
    if (ctx.has_output(i) && !ctx.output(i).data && ctx.output(i).numel() != 0) {
      throw_internal_error(node.describe(), ": kernel left output ", i, " unallocated");
    }
  }
}

}  // namespace tessera::native
