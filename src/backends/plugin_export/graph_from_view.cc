// tsrp_graph → Graph (graph_from_view.h).
#include "backends/plugin_export/graph_from_view.h"

#include <cstring>

#include "ir/error.h"

namespace tessera {
namespace {

DType dtype_of(int code, const char* what) {
  if (code == TSRP_UNDEFINED) return DType::kUndefined;
  const DType dtype = dtype_from_onnx_code(code);
  if (dtype == DType::kUndefined) throw_user_error(what, ": dtype ", onnx_dtype_code_name(code), " has no Tessera dtype");
  return dtype;
}

Shape dims_of(int32_t rank, const int64_t* dims, const char* what) {
  if (rank < 0) return {};
  if (rank > 0 && !dims) throw_user_error(what, ": rank ", rank, " without dims");
  return Shape(dims, dims + rank);
}

ValueId checked_id(int32_t id, size_t value_count, const char* what) {
  if (id == -1) return kNoValue;
  if (id < 0 || static_cast<size_t>(id) >= value_count) throw_user_error(what, ": value index ", id, " out of range");
  return id;
}

Tensor copy_tensor(DType dtype, Shape shape, const void* data, size_t nbytes, const char* what) {
  Tensor t(dtype, std::move(shape));
  if (t.nbytes() != nbytes || (nbytes && !data)) {
    throw_user_error(what, ": ", nbytes, " bytes of data for ", t.nbytes(), " bytes of tensor");
  }
  if (nbytes) std::memcpy(t.data(), data, nbytes);
  return t;
}

Attribute attribute_of(const tsrp_attribute& a) {
  Attribute out;
  switch (a.kind) {
    case TSRP_ATTR_INT: out = Attribute::of_int(a.i); break;
    case TSRP_ATTR_FLOAT: out = Attribute::of_float(a.f); break;
    case TSRP_ATTR_STRING: out = Attribute::of_string(std::string(a.s, a.s_length)); break;
    case TSRP_ATTR_INTS: out = Attribute::of_ints(std::vector<int64_t>(a.ints, a.ints + a.count)); break;
    case TSRP_ATTR_FLOATS: out = Attribute::of_floats(std::vector<float>(a.floats, a.floats + a.count)); break;
    case TSRP_ATTR_STRINGS:
      out.kind = Attribute::Kind::kStrings;
      for (size_t k = 0; k < a.count; ++k) out.strings.emplace_back(a.strings[k]);
      break;
    case TSRP_ATTR_TENSOR: {
      if (!a.tensor) throw_user_error("attribute '", a.name, "': tensor without data");
      const tsrp_tensor_data& t = *a.tensor;
      out = Attribute::of_tensor(copy_tensor(dtype_of(t.dtype, a.name), dims_of(t.rank, t.dims, a.name), t.data,
                                             t.nbytes, a.name));
      break;
    }
    case TSRP_ATTR_GRAPH:
      if (!a.graph) throw_user_error("attribute '", a.name, "': graph without a view");
      out.kind = Attribute::Kind::kGraph;
      out.graph = std::make_shared<Graph>(graph_from_view(*a.graph));
      break;
    default: throw_user_error("attribute '", a.name, "' has unknown kind ", static_cast<int>(a.kind));
  }
  return out;
}

}  // namespace

Graph graph_from_view(const tsrp_graph& view) {
  Graph g;
  g.name = view.name ? view.name : "";
  for (size_t i = 0; i < view.value_count; ++i) {
    const tsrp_value& v = *view.values[i];
    TensorType type;
    type.dtype = dtype_of(v.dtype, v.name);
    type.rank_known = v.rank >= 0;
    type.dims = dims_of(v.rank, v.dims, v.name);
    type.symbols.assign(type.dims.size(), "");
    const ValueId id = g.add_value(v.name, type);
    if (v.constant) {
      g.value(id).constant = std::make_shared<const Tensor>(copy_tensor(type.dtype, type.dims, v.constant, v.constant_bytes, v.name));
    }
  }
  for (size_t k = 0; k < view.input_count; ++k) g.inputs.push_back(checked_id(view.inputs[k], view.value_count, "graph input"));
  for (size_t k = 0; k < view.output_count; ++k) {
    g.outputs.push_back(checked_id(view.outputs[k], view.value_count, "graph output"));
  }
  for (size_t n = 0; n < view.node_count; ++n) {
    const tsrp_node& in = *view.nodes[n];
    Node node;
    node.name = in.name;
    node.op_type = in.op_type;
    node.domain = in.domain;
    node.opset = in.opset;
    for (size_t k = 0; k < in.input_count; ++k) node.inputs.push_back(checked_id(in.inputs[k], view.value_count, in.name));
    for (size_t k = 0; k < in.output_count; ++k) node.outputs.push_back(checked_id(in.outputs[k], view.value_count, in.name));
    for (size_t k = 0; k < in.attribute_count; ++k) node.attrs.set(in.attributes[k]->name, attribute_of(*in.attributes[k]));
    g.nodes.push_back(std::move(node));
  }
  return g;
}

}  // namespace tessera
