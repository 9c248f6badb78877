// Shape inference run again over a finished graph, to catch stored types that
// disagree with it (see check_inferred_types.h).
#include "passes/check_inferred_types.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/op_schema.h"
#include "ir/shape_util.h"

namespace tessera {
namespace {

bool same_type(const TensorType& stored, const TensorType& inferred) {
  return stored.dtype == inferred.dtype && stored.rank_known == inferred.rank_known &&
         (!stored.rank_known || stored.dims == inferred.dims);
}

/// Inference writes outputs by index and reads formal inputs by index; a node
/// with the wrong arity must not reach it.
void check_arity(const Node& node, const OpSchema& schema) {
  size_t formal = node.inputs.size();
  if (const Attribute* a = node.attrs.find("tessera_formal_inputs")) {
    if (a->kind != Attribute::Kind::kInt || a->i < 0 || static_cast<uint64_t>(a->i) > node.inputs.size()) {
      throw_user_error("inconsistent plan: ", node.describe(), ": bad attribute 'tessera_formal_inputs'");
    }
    formal = static_cast<size_t>(a->i);
  }
  if (formal > static_cast<size_t>(schema.max_inputs) || node.outputs.size() < static_cast<size_t>(schema.min_outputs) ||
      node.outputs.size() > static_cast<size_t>(schema.max_outputs)) {
    throw_user_error("inconsistent plan: ", node.describe(), ": has ", formal, " inputs and ", node.outputs.size(),
                     " outputs, the op takes at most ", schema.max_inputs, " inputs and gives ", schema.min_outputs,
                     " to ", schema.max_outputs, " outputs");
  }
}

}  // namespace

void check_inferred_types(const Graph& graph) {
  for (const Node& node : graph.nodes) {
    const OpSchema* schema = OpRegistry::instance().find(node.domain, node.op_type);
    if (!schema) throw_user_error("inconsistent plan: ", node.describe(), ": unknown op (domain '", node.domain, "')");
    check_arity(node, *schema);
    if (!schema->input_dtypes.empty() && node.has_input(0)) {
      const Value& in = graph.value(node.inputs[0]);
      if (std::find(schema->input_dtypes.begin(), schema->input_dtypes.end(), in.type.dtype) ==
          schema->input_dtypes.end()) {
        throw_user_error("inconsistent plan: ", node.describe(), ": input '", in.name, "' has dtype ",
                         dtype_name(in.type.dtype), ", which the op does not accept");
      }
    }
    std::vector<TensorType> inferred;
    try {
      inferred = infer_node_outputs(graph, node, *schema);
    } catch (const Error& error) {
      if (error.kind() == ErrorKind::kInternal) throw;
      throw_user_error("inconsistent plan: ", error.what());
    }
    for (size_t i = 0; i < node.outputs.size(); ++i) {
      if (node.outputs[i] == kNoValue) continue;
      const Value& out = graph.value(node.outputs[i]);
      if (!same_type(out.type, inferred[i])) {
        throw_user_error("inconsistent plan: ", node.describe(), ": output '", out.name, "' is stored as ",
                         out.type.to_string(), ", its inputs give ", inferred[i].to_string());
      }
      if (!shape_fits_in_memory(out.type.dims, out.type.dtype)) {
        throw_user_error("inconsistent plan: ", node.describe(), ": output '", out.name, "' has shape ",
                         shape_to_string(out.type.dims), ", which is too large to allocate");
      }
    }
  }
}

}  // namespace tessera
