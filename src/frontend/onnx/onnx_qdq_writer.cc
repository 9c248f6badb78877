#include "frontend/onnx/onnx_qdq_writer.h"

#include <onnx/onnx_pb.h>

#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "ir/error.h"

namespace tessera::onnx_frontend {
namespace {

std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_user_error("cannot open '", path, "'");
  std::ostringstream data;
  data << in.rdbuf();
  return data.str();
}

class QdqWriter {
 public:
  explicit QdqWriter(onnx::ModelProto& model) : model_(model), graph_(*model.mutable_graph()) {
    collect_names(graph_);
    for (const auto& opset : model_.opset_import()) {
      if (opset.domain().empty() || opset.domain() == "ai.onnx") opset_ = opset.version();
    }
  }

  void apply(const QdqPlan& plan) {
    if (opset_ < 10) {
      throw_user_error("the model imports ONNX opset ", opset_, ": QuantizeLinear and DequantizeLinear need opset 10 or newer");
    }
    for (const QdqConstant& constant : plan.constants) add_constant(constant);
    for (const QdqActivation& activation : plan.activations) add_activation(activation);
    drop_unused_constants();
  }

 private:
  /// Every tensor and node name of the graph and its subgraphs (new names avoid them all).
  void collect_names(const onnx::GraphProto& graph) {
    for (const auto& v : graph.input()) taken_.insert(v.name());
    for (const auto& v : graph.output()) taken_.insert(v.name());
    for (const auto& v : graph.value_info()) taken_.insert(v.name());
    for (const auto& t : graph.initializer()) taken_.insert(t.name());
    for (const auto& node : graph.node()) {
      taken_.insert(node.name());
      for (const auto& name : node.input()) taken_.insert(name);
      for (const auto& name : node.output()) taken_.insert(name);
      for (const auto& attr : node.attribute()) {
        if (attr.has_g()) collect_names(attr.g());
        for (const auto& g : attr.graphs()) collect_names(g);
      }
    }
  }

  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 1; taken_.count(name); ++k) name = base + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
  }

  void add_scalar_or_vector(const std::string& name, const std::vector<float>& values, bool vector) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    if (vector) t->add_dims(static_cast<int64_t>(values.size()));
    for (float v : values) t->add_float_data(v);
  }

  void add_zero_points(const std::string& name, int data_type, const std::vector<int32_t>& values, bool vector) {
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(name);
    t->set_data_type(data_type);
    if (vector) t->add_dims(static_cast<int64_t>(values.size()));
    for (int32_t v : values) t->add_int32_data(v);  // uint8 / int8 / int32 all live in int32_data
  }

  onnx::NodeProto* add_node(const std::string& op, const std::string& name, std::vector<std::string> inputs,
                            const std::string& output, int64_t axis) {
    onnx::NodeProto* node = graph_.add_node();
    node->set_op_type(op);
    node->set_name(name);
    for (const auto& in : inputs) node->add_input(in);
    node->add_output(output);
    if (axis >= 0) {
      onnx::AttributeProto* a = node->add_attribute();
      a->set_name("axis");
      a->set_type(onnx::AttributeProto::INT);
      a->set_i(axis);
    }
    return node;
  }

  void check_axis(const QdqConstant& c) const {
    if (c.axis >= 0 && opset_ < 13) {
      throw_user_error("constant '", c.tensor, "': per-channel quantization needs opset 13 or newer (the model imports opset ",
                       opset_, "); quantize it per tensor");
    }
  }

  void add_constant(const QdqConstant& c) {
    check_axis(c);
    const bool is_int32 = c.quantized.dtype() == DType::kInt32;
    if (!is_int32 && c.quantized.dtype() != DType::kInt8) {
      throw_internal_error("constant '", c.tensor, "' quantized to ", dtype_name(c.quantized.dtype()));
    }
    const std::string q = fresh(c.tensor + "_quantized");
    const std::string scale = fresh(c.tensor + "_scale");
    const std::string zp = fresh(c.tensor + "_zero_point");
    const std::string dq = fresh(c.tensor + "_dequantized");
    onnx::TensorProto* t = graph_.add_initializer();
    t->set_name(q);
    t->set_data_type(is_int32 ? onnx::TensorProto::INT32 : onnx::TensorProto::INT8);
    for (int64_t d : c.quantized.shape()) t->add_dims(d);
    t->set_raw_data(c.quantized.data(), c.quantized.nbytes());  // little-endian, as raw_data is
    const bool vector = c.axis >= 0;
    add_scalar_or_vector(scale, c.scales, vector);
    add_zero_points(zp, is_int32 ? onnx::TensorProto::INT32 : onnx::TensorProto::INT8,
                    std::vector<int32_t>(c.scales.size(), 0), vector);
    add_node("DequantizeLinear", fresh(c.tensor + "_DequantizeLinear"), {q, scale, zp}, dq, c.axis);
    const std::set<std::string> consumers(c.consumers.begin(), c.consumers.end());
    size_t replaced = 0;
    for (auto& node : *graph_.mutable_node()) {
      if (node.output_size() == 0 || !consumers.count(node.output(0))) continue;
      for (auto& in : *node.mutable_input()) {
        if (in == c.tensor) {
          in = dq;
          ++replaced;
        }
      }
    }
    if (replaced == 0) throw_internal_error("constant '", c.tensor, "': none of its planned consumers reads it");
  }

  void add_activation(const QdqActivation& a) {
    const std::string q = fresh(a.tensor + "_quantized");
    const std::string scale = fresh(a.tensor + "_scale");
    const std::string zp = fresh(a.tensor + "_zero_point");
    const std::string dq = fresh(a.tensor + "_dequantized");
    // Rename the readers first: the two new nodes are added after.
    for (auto& node : *graph_.mutable_node()) {
      for (auto& in : *node.mutable_input()) {
        if (in == a.tensor) in = dq;
      }
    }
    add_scalar_or_vector(scale, {a.scale}, false);
    add_zero_points(zp, a.is_signed ? onnx::TensorProto::INT8 : onnx::TensorProto::UINT8, {a.zero_point}, false);
    add_node("QuantizeLinear", fresh(a.tensor + "_QuantizeLinear"), {a.tensor, scale, zp}, q, -1);
    add_node("DequantizeLinear", fresh(a.tensor + "_DequantizeLinear"), {q, scale, zp}, dq, -1);
  }

  /// Initializers (and their graph-input entries) and Constant nodes nothing reads any more.
  void drop_unused_constants() {
    std::set<std::string> read;
    collect_reads(graph_, read);
    for (const auto& v : graph_.output()) read.insert(v.name());
    auto* inits = graph_.mutable_initializer();
    std::set<std::string> dropped;
    for (int i = inits->size() - 1; i >= 0; --i) {
      if (!read.count(inits->Get(i).name())) {
        dropped.insert(inits->Get(i).name());
        inits->DeleteSubrange(i, 1);
      }
    }
    auto* inputs = graph_.mutable_input();
    for (int i = inputs->size() - 1; i >= 0; --i) {
      if (dropped.count(inputs->Get(i).name())) inputs->DeleteSubrange(i, 1);
    }
    auto* nodes = graph_.mutable_node();
    for (int i = nodes->size() - 1; i >= 0; --i) {
      const auto& node = nodes->Get(i);
      if (node.op_type() == "Constant" && node.domain().empty() && node.output_size() == 1 && !read.count(node.output(0))) {
        nodes->DeleteSubrange(i, 1);
      }
    }
  }

  static void collect_reads(const onnx::GraphProto& graph, std::set<std::string>& read) {
    for (const auto& node : graph.node()) {
      for (const auto& name : node.input()) read.insert(name);
      for (const auto& attr : node.attribute()) {
        if (attr.has_g()) collect_reads(attr.g(), read);
        for (const auto& g : attr.graphs()) collect_reads(g, read);
      }
    }
    for (const auto& v : graph.output()) read.insert(v.name());  // a subgraph may output an outer value
  }

  onnx::ModelProto& model_;
  onnx::GraphProto& graph_;
  std::set<std::string> taken_;
  int64_t opset_ = 1;
};

bool uses_external_data(const onnx::GraphProto& graph) {
  for (const auto& t : graph.initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL) return true;
  }
  for (const auto& node : graph.node()) {
    for (const auto& attr : node.attribute()) {
      if (attr.has_t() && attr.t().data_location() == onnx::TensorProto::EXTERNAL) return true;
      if (attr.has_g() && uses_external_data(attr.g())) return true;
      for (const auto& g : attr.graphs()) {
        if (uses_external_data(g)) return true;
      }
    }
  }
  return false;
}

/// Reorders the nodes topologically (the added Q/DQ nodes were appended; the
/// file must list each node after the producers of its inputs).
void sort_nodes(onnx::GraphProto& graph) {
  std::set<std::string> available;
  for (const auto& v : graph.input()) available.insert(v.name());
  for (const auto& t : graph.initializer()) available.insert(t.name());
  std::map<std::string, int> producer;
  for (int i = 0; i < graph.node_size(); ++i) {
    for (const auto& out : graph.node(i).output()) producer[out] = i;
  }
  std::vector<int> order;
  std::vector<int> state(static_cast<size_t>(graph.node_size()), 0);  // 0 new, 1 on the stack, 2 placed
  std::function<void(int)> visit = [&](int i) {
    if (state[static_cast<size_t>(i)] == 2) return;
    if (state[static_cast<size_t>(i)] == 1) throw_internal_error("the quantized graph has a cycle through node ", i);
    state[static_cast<size_t>(i)] = 1;
    std::set<std::string> needed(graph.node(i).input().begin(), graph.node(i).input().end());
    // Values a subgraph reads from the enclosing scope need their producers first too.
    std::function<void(const onnx::GraphProto&)> outer_reads = [&](const onnx::GraphProto& g) {
      for (const auto& n : g.node()) {
        for (const auto& in : n.input()) needed.insert(in);
        for (const auto& attr : n.attribute()) {
          if (attr.has_g()) outer_reads(attr.g());
          for (const auto& sub : attr.graphs()) outer_reads(sub);
        }
      }
    };
    for (const auto& attr : graph.node(i).attribute()) {
      if (attr.has_g()) outer_reads(attr.g());
      for (const auto& g : attr.graphs()) outer_reads(g);
    }
    for (const auto& in : needed) {
      auto it = producer.find(in);
      if (it != producer.end() && it->second != i && !available.count(in)) visit(it->second);
    }
    state[static_cast<size_t>(i)] = 2;
    order.push_back(i);
  };
  for (int i = 0; i < graph.node_size(); ++i) visit(i);
  google::protobuf::RepeatedPtrField<onnx::NodeProto> sorted;
  for (int i : order) *sorted.Add() = graph.node(i);
  graph.mutable_node()->Swap(&sorted);
}

}  // namespace

std::string make_qdq_model(const std::string& input_path, const std::string& output_path, const QdqPlan& plan) {
  onnx::ModelProto model;
  const std::string bytes = read_whole_file(input_path);
  if (!model.ParseFromString(bytes) || !model.has_graph()) throw_user_error("'", input_path, "' is not an ONNX model");
  if (uses_external_data(model.graph())) {
    namespace fs = std::filesystem;
    const fs::path in_dir = fs::absolute(input_path).parent_path();
    const fs::path out_dir = fs::absolute(output_path).parent_path();
    if (fs::weakly_canonical(in_dir) != fs::weakly_canonical(out_dir)) {
      throw_user_error("'", input_path, "' keeps tensors in external data files: write the quantized model into the same folder (",
                       in_dir.string(), ") so that they are found");
    }
  }
  QdqWriter writer(model);
  writer.apply(plan);
  sort_nodes(*model.mutable_graph());
  model.set_producer_name(model.producer_name().empty() ? "tessera quantize" : model.producer_name() + " + tessera quantize");
  std::string out;
  if (!model.SerializeToString(&out)) throw_user_error("the quantized model is too large to serialize (over 2 GiB)");
  return out;
}

}  // namespace tessera::onnx_frontend
