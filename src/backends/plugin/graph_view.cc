// Builds the C view of a graph (graph_view.h). Every pointer array is sized
// once before pointers into it are taken, so nothing moves afterwards.
#include "backends/plugin/graph_view.h"

#include <deque>

namespace tessera {

tsrp_dtype plugin_dtype(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return TSRP_FLOAT32;
    case DType::kFloat16: return TSRP_FLOAT16;
    case DType::kFloat64: return TSRP_FLOAT64;
    case DType::kBFloat16: return TSRP_BFLOAT16;
    case DType::kInt8: return TSRP_INT8;
    case DType::kInt16: return TSRP_INT16;
    case DType::kInt32: return TSRP_INT32;
    case DType::kInt64: return TSRP_INT64;
    case DType::kUInt8: return TSRP_UINT8;
    case DType::kUInt16: return TSRP_UINT16;
    case DType::kUInt32: return TSRP_UINT32;
    case DType::kUInt64: return TSRP_UINT64;
    case DType::kBool: return TSRP_BOOL;
    case DType::kUndefined: break;
  }
  return TSRP_UNDEFINED;
}

DLDataType dlpack_dtype(DType dtype) {
  constexpr uint8_t kDLBoolCode = 6;  // DLPack 0.8's kDLBool; Debian's 0.6 header lacks the name
  switch (dtype) {
    case DType::kFloat32: return {kDLFloat, 32, 1};
    case DType::kFloat16: return {kDLFloat, 16, 1};
    case DType::kFloat64: return {kDLFloat, 64, 1};
    case DType::kBFloat16: return {kDLBfloat, 16, 1};
    case DType::kInt8: return {kDLInt, 8, 1};
    case DType::kInt16: return {kDLInt, 16, 1};
    case DType::kInt32: return {kDLInt, 32, 1};
    case DType::kInt64: return {kDLInt, 64, 1};
    case DType::kUInt8: return {kDLUInt, 8, 1};
    case DType::kUInt16: return {kDLUInt, 16, 1};
    case DType::kUInt32: return {kDLUInt, 32, 1};
    case DType::kUInt64: return {kDLUInt, 64, 1};
    case DType::kBool: return {kDLBoolCode, 8, 1};
    case DType::kUndefined: break;
  }
  return {kDLOpaqueHandle, 0, 0};
}

namespace {

tsrp_attribute_kind attribute_kind(Attribute::Kind kind) {
  switch (kind) {
    case Attribute::Kind::kInt: return TSRP_ATTR_INT;
    case Attribute::Kind::kFloat: return TSRP_ATTR_FLOAT;
    case Attribute::Kind::kString: return TSRP_ATTR_STRING;
    case Attribute::Kind::kInts: return TSRP_ATTR_INTS;
    case Attribute::Kind::kFloats: return TSRP_ATTR_FLOATS;
    case Attribute::Kind::kStrings: return TSRP_ATTR_STRINGS;
    case Attribute::Kind::kTensor: return TSRP_ATTR_TENSOR;
    case Attribute::Kind::kGraph: return TSRP_ATTR_GRAPH;
  }
  return TSRP_ATTR_INT;
}

}  // namespace

struct GraphView::Storage {
  tsrp_graph graph{};
  std::vector<tsrp_value> values;
  std::vector<const tsrp_value*> value_pointers;
  std::vector<tsrp_node> nodes;
  std::vector<const tsrp_node*> node_pointers;
  std::vector<std::vector<tsrp_attribute>> attributes;  // per node
  std::vector<std::vector<const tsrp_attribute*>> attribute_pointers;
  std::vector<std::vector<const char*>> string_lists;   // STRINGS attributes
  std::deque<tsrp_tensor_data> tensors;                 // TENSOR attributes
  std::deque<GraphView> subgraphs;                      // GRAPH attributes
  std::vector<int32_t> ids;                             // inputs, outputs, node operands
};

GraphView::GraphView(const Graph& graph) : storage_(std::make_unique<Storage>()) {
  Storage& s = *storage_;
  s.values.resize(graph.values.size());
  for (size_t i = 0; i < graph.values.size(); ++i) {
    const Value& v = graph.values[i];
    tsrp_value& out = s.values[i];
    out.struct_size = sizeof(tsrp_value);
    out.name = v.name.c_str();
    out.dtype = plugin_dtype(v.type.dtype);
    out.rank = v.type.rank_known ? static_cast<int32_t>(v.type.dims.size()) : -1;
    out.dims = v.type.dims.data();
    if (v.constant) {
      out.constant = v.constant->data();
      out.constant_bytes = v.constant->nbytes();
    }
    s.value_pointers.push_back(&out);
  }
  // All value ids in one array: graph inputs, outputs, then each node's inputs and outputs.
  size_t id_count = graph.inputs.size() + graph.outputs.size();
  for (const Node& node : graph.nodes) id_count += node.inputs.size() + node.outputs.size();
  s.ids.reserve(id_count);
  auto push_ids = [&](const std::vector<ValueId>& ids) {
    const int32_t* first = s.ids.data() + s.ids.size();
    for (ValueId id : ids) s.ids.push_back(static_cast<int32_t>(id));
    return first;
  };
  s.graph.struct_size = sizeof(tsrp_graph);
  s.graph.name = graph.name.c_str();
  s.graph.value_count = s.value_pointers.size();
  s.graph.values = s.value_pointers.data();
  s.graph.input_count = graph.inputs.size();
  s.graph.inputs = push_ids(graph.inputs);
  s.graph.output_count = graph.outputs.size();
  s.graph.outputs = push_ids(graph.outputs);

  s.nodes.resize(graph.nodes.size());
  s.attributes.resize(graph.nodes.size());
  s.attribute_pointers.resize(graph.nodes.size());
  size_t string_list_count = 0;
  for (const Node& node : graph.nodes) {
    for (const auto& [name, attr] : node.attrs.all()) string_list_count += attr.kind == Attribute::Kind::kStrings;
  }
  s.string_lists.reserve(string_list_count);
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    tsrp_node& out = s.nodes[n];
    out.struct_size = sizeof(tsrp_node);
    out.name = node.name.c_str();
    out.op_type = node.op_type.c_str();
    out.domain = node.domain.c_str();
    out.opset = node.opset;
    out.input_count = node.inputs.size();
    out.inputs = push_ids(node.inputs);
    out.output_count = node.outputs.size();
    out.outputs = push_ids(node.outputs);
    std::vector<tsrp_attribute>& attrs = s.attributes[n];
    attrs.reserve(node.attrs.all().size());
    for (const auto& [name, attr] : node.attrs.all()) {
      tsrp_attribute a{};
      a.struct_size = sizeof(tsrp_attribute);
      a.name = name.c_str();
      a.kind = attribute_kind(attr.kind);
      a.i = attr.i;
      a.f = attr.f;
      a.s = attr.s.c_str();
      a.s_length = attr.s.size();
      switch (attr.kind) {
        case Attribute::Kind::kInts:
          a.count = attr.ints.size();
          a.ints = attr.ints.data();
          break;
        case Attribute::Kind::kFloats:
          a.count = attr.floats.size();
          a.floats = attr.floats.data();
          break;
        case Attribute::Kind::kStrings: {
          std::vector<const char*>& list = s.string_lists.emplace_back();
          for (const std::string& str : attr.strings) list.push_back(str.c_str());
          a.count = list.size();
          a.strings = list.data();
          break;
        }
        case Attribute::Kind::kTensor:
          if (attr.tensor) {
            tsrp_tensor_data& t = s.tensors.emplace_back();
            t.struct_size = sizeof(tsrp_tensor_data);
            t.dtype = plugin_dtype(attr.tensor->dtype());
            t.rank = static_cast<int32_t>(attr.tensor->shape().size());
            t.dims = attr.tensor->shape().data();
            t.data = attr.tensor->data();
            t.nbytes = attr.tensor->nbytes();
            a.tensor = &t;
          }
          break;
        case Attribute::Kind::kGraph:
          if (attr.graph) a.graph = s.subgraphs.emplace_back(*attr.graph).get();
          break;
        default: break;
      }
      attrs.push_back(a);
    }
    for (const tsrp_attribute& a : attrs) s.attribute_pointers[n].push_back(&a);
    out.attribute_count = attrs.size();
    out.attributes = s.attribute_pointers[n].data();
    s.node_pointers.push_back(&out);
  }
  s.graph.node_count = s.node_pointers.size();
  s.graph.nodes = s.node_pointers.data();
}

GraphView::~GraphView() = default;

const tsrp_graph* GraphView::get() const { return &storage_->graph; }

}  // namespace tessera
