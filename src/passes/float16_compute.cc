// See float16_compute.h.
#include "passes/float16_compute.h"

#include <set>
#include <string>
#include <vector>

#include "ir/error.h"

namespace tessera {
namespace {

constexpr int64_t kOnnxFloat = 1;     // TensorProto.FLOAT
constexpr int64_t kOnnxFloat16 = 10;  // TensorProto.FLOAT16

Tensor float32_of(const Tensor& half) {
  Tensor out(DType::kFloat32, half.shape());
  const uint16_t* src = half.as<uint16_t>();
  float* dst = out.as<float>();
  for (int64_t i = 0; i < half.numel(); ++i) dst[i] = half_to_float(src[i]);
  return out;
}

bool holds_float16(const Graph& graph) {
  for (const Value& v : graph.values) {
    if (v.type.dtype == DType::kFloat16 || (v.constant && v.constant->dtype() == DType::kFloat16)) return true;
  }
  for (const Node& node : graph.nodes) {
    for (const auto& [name, attr] : node.attrs.all()) {
      if (attr.kind == Attribute::Kind::kInt && (name == "to" || name == "dtype") && attr.i == kOnnxFloat16) return true;
      if (attr.kind == Attribute::Kind::kTensor && attr.tensor && attr.tensor->dtype() == DType::kFloat16) return true;
      if (attr.kind == Attribute::Kind::kGraph && attr.graph && holds_float16(*attr.graph)) return true;
    }
  }
  return false;
}

int convert_node_attributes(Node& node);

/// Every float16 value, constant and attribute of `graph` (a body: its formal inputs and outputs too,
/// except those in `keep`) made float32.
int convert_values(Graph& graph, const std::set<ValueId>& keep) {
  int changed = 0;
  for (size_t i = 0; i < graph.values.size(); ++i) {
    if (keep.count(static_cast<ValueId>(i))) continue;
    Value& v = graph.values[i];
    if (v.constant && v.constant->dtype() == DType::kFloat16) {
      v.constant = std::make_shared<const Tensor>(float32_of(*v.constant));
      ++changed;
    }
    if (v.type.dtype == DType::kFloat16) {
      v.type.dtype = DType::kFloat32;
      ++changed;
    }
  }
  for (Node& node : graph.nodes) changed += convert_node_attributes(node);
  return changed;
}

int convert_node_attributes(Node& node) {
  int changed = 0;
  const AttributeMap::Map attrs = node.attrs.all();
  for (const auto& [name, attr] : attrs) {
    if (attr.kind == Attribute::Kind::kInt && (name == "to" || name == "dtype") && attr.i == kOnnxFloat16) {
      node.attrs.set(name, Attribute::of_int(kOnnxFloat));
      ++changed;
    } else if (attr.kind == Attribute::Kind::kTensor && attr.tensor && attr.tensor->dtype() == DType::kFloat16) {
      node.attrs.set(name, Attribute::of_tensor(float32_of(*attr.tensor)));
      ++changed;
    } else if (attr.kind == Attribute::Kind::kGraph && attr.graph) {
      // Bodies share their graph with copies of the node: converted once, on a copy of their own.
      Attribute body = attr;
      body.graph = std::make_shared<Graph>(*attr.graph);
      const int in_body = convert_values(*body.graph, {});
      if (in_body > 0) {
        node.attrs.set(name, std::move(body));
        changed += in_body;
      }
    }
  }
  return changed;
}

std::string unique_node_name(const Graph& graph, const std::string& base) {
  std::set<std::string> names;
  for (const Node& node : graph.nodes) names.insert(node.name);
  if (!names.count(base)) return base;
  for (int i = 1;; ++i) {
    const std::string candidate = base + "_" + std::to_string(i);
    if (!names.count(candidate)) return candidate;
  }
}

Node cast_node(const Graph& graph, const std::string& base, ValueId from, ValueId to, int64_t onnx_type, int opset) {
  Node cast;
  cast.name = unique_node_name(graph, base);
  cast.op_type = "Cast";
  cast.opset = opset;
  cast.inputs = {from};
  cast.outputs = {to};
  cast.attrs.set("to", Attribute::of_int(onnx_type));
  return cast;
}

void replace_reads(Graph& graph, ValueId from, ValueId to) {
  for (Node& node : graph.nodes) {
    for (ValueId& in : node.inputs) {
      if (in == from) in = to;
    }
  }
}

}  // namespace

int compute_float16_in_float32(Graph& graph) {
  if (!holds_float16(graph)) return 0;
  // An output whose type the model does not declare (ONNX's checker requires one; graphs built by hand
  // may leave it to inference) might be float16 and would come out float32: such graphs are left as
  // they are, and run on the few kernels that take float16.
  for (ValueId id : graph.outputs) {
    if (graph.value(id).type.dtype == DType::kUndefined) return 0;
  }
  int opset = 13;
  for (const Node& node : graph.nodes) {
    if (node.domain.empty() && node.opset > 0) opset = node.opset;
  }
  std::set<ValueId> keep;  // the caller's float16 inputs and outputs
  std::vector<Node> in_casts, out_casts;
  std::set<ValueId> inputs(graph.inputs.begin(), graph.inputs.end());
  for (ValueId id : graph.inputs) {
    const TensorType type = graph.value(id).type;
    if (type.dtype != DType::kFloat16) continue;
    if (!type.is_tensor()) throw_unsupported("input '", graph.value(id).name, "' is a ", type.to_string(),
                                             ": float16 sequences and optionals are not supported as model inputs");
    TensorType wide = type;
    wide.dtype = DType::kFloat32;
    const ValueId wide_id = graph.add_value(graph.unique_value_name(graph.value(id).name + "_float32"), wide);
    replace_reads(graph, id, wide_id);
    in_casts.push_back(cast_node(graph, graph.value(id).name + "_to_float32", id, wide_id, kOnnxFloat, opset));
    keep.insert(id);
  }
  for (ValueId& id : graph.outputs) {
    const TensorType type = graph.value(id).type;
    if (type.dtype != DType::kFloat16 || keep.count(id)) continue;
    if (inputs.count(id) || graph.is_constant(id)) {  // handed out as it is: stays float16
      keep.insert(id);
      continue;
    }
    if (!type.is_tensor()) throw_unsupported("output '", graph.value(id).name, "' is a ", type.to_string(),
                                             ": float16 sequences and optionals are not supported as model outputs");
    TensorType wide = type;
    wide.dtype = DType::kFloat32;
    const ValueId wide_id = graph.add_value(graph.unique_value_name(graph.value(id).name + "_float32"), wide);
    // The producer writes the float32 value, every reader reads it, and a Cast makes the output.
    for (Node& node : graph.nodes) {
      for (ValueId& out : node.outputs) {
        if (out == id) out = wide_id;
      }
    }
    replace_reads(graph, id, wide_id);
    out_casts.push_back(cast_node(graph, graph.value(id).name + "_to_float16", wide_id, id, kOnnxFloat16, opset));
    keep.insert(id);
  }
  const int changed = convert_values(graph, keep);
  graph.nodes.insert(graph.nodes.begin(), in_casts.begin(), in_casts.end());
  graph.nodes.insert(graph.nodes.end(), out_casts.begin(), out_casts.end());
  return changed;
}

}  // namespace tessera
