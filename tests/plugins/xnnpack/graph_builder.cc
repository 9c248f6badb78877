// Hand-built tsrp_graph views and a dlopen host for plug-in tests (graph_builder.h).
#include "graph_builder.h"

#include <dlfcn.h>

#include <cstring>

namespace xnnpack_test {
namespace {

tsrp_status* make_status(tsrp_status_code code, const char* message) {
  return new tsrp_status{code, message ? message : ""};
}

}  // namespace

const tsrp_host* test_host() {
  static const tsrp_host host = {sizeof(tsrp_host), TSRP_ABI_MAJOR, TSRP_ABI_MINOR, "test", make_status};
  return &host;
}

int GraphBuilder::add_value(const std::string& name, std::vector<int64_t> dims, tsrp_dtype dtype,
                            std::vector<uint8_t> data) {
  values_storage_.push_back(std::make_unique<ValueStorage>());
  ValueStorage& s = *values_storage_.back();
  s.name = name;
  s.dims = std::move(dims);
  s.data = std::move(data);
  auto v = std::make_unique<tsrp_value>();
  v->struct_size = sizeof(tsrp_value);
  v->name = s.name.c_str();
  v->dtype = dtype;
  v->rank = static_cast<int32_t>(s.dims.size());
  v->dims = s.dims.data();
  values_.push_back(std::move(v));
  return static_cast<int>(values_.size() - 1);
}

int GraphBuilder::value(const std::string& name, std::vector<int64_t> dims, tsrp_dtype dtype) {
  return add_value(name, std::move(dims), dtype, {});
}

int GraphBuilder::constant(const std::string& name, std::vector<int64_t> dims, std::vector<float> data) {
  std::vector<uint8_t> bytes(data.size() * sizeof(float));
  std::memcpy(bytes.data(), data.data(), bytes.size());
  const int i = add_value(name, std::move(dims), TSRP_FLOAT32, std::move(bytes));
  values_[i]->constant = values_storage_.back()->data.data();
  values_[i]->constant_bytes = values_storage_.back()->data.size();
  return i;
}

int GraphBuilder::constant_int64(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> data) {
  std::vector<uint8_t> bytes(data.size() * sizeof(int64_t));
  std::memcpy(bytes.data(), data.data(), bytes.size());
  const int i = add_value(name, std::move(dims), TSRP_INT64, std::move(bytes));
  values_[i]->constant = values_storage_.back()->data.data();
  values_[i]->constant_bytes = values_storage_.back()->data.size();
  return i;
}

int GraphBuilder::node(const std::string& op_type, std::vector<int> inputs, std::vector<int> outputs, int opset,
                       const std::string& domain) {
  nodes_.emplace_back();
  NodeStorage& n = nodes_.back();
  n.op_type = op_type;
  n.domain = domain;
  n.name = op_type + "_" + std::to_string(nodes_.size() - 1);
  n.inputs.assign(inputs.begin(), inputs.end());
  n.outputs.assign(outputs.begin(), outputs.end());
  n.node.struct_size = sizeof(tsrp_node);
  n.node.opset = opset;
  return static_cast<int>(nodes_.size() - 1);
}

GraphBuilder::AttributeStorage& GraphBuilder::add_attribute(const std::string& name, tsrp_attribute_kind kind) {
  attributes_.emplace_back();
  AttributeStorage& a = attributes_.back();
  a.name = name;
  a.attribute.struct_size = sizeof(tsrp_attribute);
  a.attribute.kind = kind;
  nodes_.back().attribute_pointers.push_back(&a.attribute);
  return a;
}

void GraphBuilder::attr_int(const std::string& name, int64_t v) { add_attribute(name, TSRP_ATTR_INT).attribute.i = v; }
void GraphBuilder::attr_float(const std::string& name, float v) { add_attribute(name, TSRP_ATTR_FLOAT).attribute.f = v; }
void GraphBuilder::attr_string(const std::string& name, const std::string& v) { add_attribute(name, TSRP_ATTR_STRING).s = v; }
void GraphBuilder::attr_ints(const std::string& name, std::vector<int64_t> v) {
  add_attribute(name, TSRP_ATTR_INTS).ints = std::move(v);
}
void GraphBuilder::attr_graph(const std::string& name, const tsrp_graph* g) {
  add_attribute(name, TSRP_ATTR_GRAPH).attribute.graph = g;
}

const tsrp_graph* GraphBuilder::graph() {
  value_pointers_.clear();
  for (auto& v : values_) value_pointers_.push_back(v.get());
  node_pointers_.clear();
  for (NodeStorage& n : nodes_) {
    n.node.name = n.name.c_str();
    n.node.op_type = n.op_type.c_str();
    n.node.domain = n.domain.c_str();
    n.node.input_count = n.inputs.size();
    n.node.inputs = n.inputs.data();
    n.node.output_count = n.outputs.size();
    n.node.outputs = n.outputs.data();
    n.node.attribute_count = n.attribute_pointers.size();
    n.node.attributes = n.attribute_pointers.data();
    node_pointers_.push_back(&n.node);
  }
  for (AttributeStorage& a : attributes_) {
    a.attribute.name = a.name.c_str();
    a.attribute.s = a.s.c_str();
    a.attribute.s_length = a.s.size();
    a.attribute.count = a.ints.size();
    a.attribute.ints = a.ints.data();
  }
  graph_.struct_size = sizeof(tsrp_graph);
  graph_.name = name_.c_str();
  graph_.value_count = value_pointers_.size();
  graph_.values = value_pointers_.data();
  graph_.node_count = node_pointers_.size();
  graph_.nodes = node_pointers_.data();
  graph_.input_count = inputs_.size();
  graph_.inputs = inputs_.data();
  graph_.output_count = outputs_.size();
  graph_.outputs = outputs_.data();
  return &graph_;
}

Plugin::Plugin(const char* path) {
  handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    error = dlerror();
    return;
  }
  auto entry = reinterpret_cast<tsrp_entry_point>(dlsym(handle, TSRP_ENTRY_POINT_NAME));
  if (!entry) {
    error = "no entry point";
    return;
  }
  table = entry(test_host());
}

Plugin::~Plugin() {
  // Not dlclosed: XNNPACK keeps process-wide state (it is never deinitialised).
}

}  // namespace xnnpack_test
