// Hand-built tsrp_graph views for plug-in tests, and a host that loads a
// plug-in with dlopen. The builder owns every struct and string it hands out
// (stable addresses), so a graph stays valid as long as its builder.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <tessera/backend_plugin.h>

struct tsrp_status {
  tsrp_status_code code;
  std::string message;
};

namespace xnnpack_test {

class GraphBuilder {
 public:
  int value(const std::string& name, std::vector<int64_t> dims, tsrp_dtype dtype = TSRP_FLOAT32);
  int constant(const std::string& name, std::vector<int64_t> dims, std::vector<float> data);
  int constant_int64(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> data);
  /// Adds a node; returns its index. Attributes are added to the last node.
  int node(const std::string& op_type, std::vector<int> inputs, std::vector<int> outputs, int opset = 17,
           const std::string& domain = "");
  void attr_int(const std::string& name, int64_t v);
  void attr_float(const std::string& name, float v);
  void attr_string(const std::string& name, const std::string& v);
  void attr_ints(const std::string& name, std::vector<int64_t> v);
  void attr_graph(const std::string& name, const tsrp_graph* g);
  void inputs(std::vector<int> v) { inputs_ = std::move(v); }
  void outputs(std::vector<int> v) { outputs_ = std::move(v); }
  const tsrp_graph* graph();
  const tsrp_value* value_at(int i) const { return values_[i].get(); }

 private:
  struct NodeStorage {
    tsrp_node node{};
    std::string op_type, domain, name;
    std::vector<int32_t> inputs, outputs;
    std::vector<const tsrp_attribute*> attribute_pointers;
  };
  struct AttributeStorage {
    tsrp_attribute attribute{};
    std::string name, s;
    std::vector<int64_t> ints;
  };
  struct ValueStorage {
    tsrp_value value{};
    std::string name;
    std::vector<int64_t> dims;
    std::vector<uint8_t> data;
  };
  AttributeStorage& add_attribute(const std::string& name, tsrp_attribute_kind kind);
  int add_value(const std::string& name, std::vector<int64_t> dims, tsrp_dtype dtype, std::vector<uint8_t> data);
  std::deque<std::unique_ptr<ValueStorage>> values_storage_;
  std::vector<std::unique_ptr<tsrp_value>> values_;
  std::deque<NodeStorage> nodes_;
  std::deque<AttributeStorage> attributes_;
  std::vector<const tsrp_value*> value_pointers_;
  std::vector<const tsrp_node*> node_pointers_;
  std::vector<int32_t> inputs_, outputs_;
  tsrp_graph graph_{};
  std::string name_ = "region";
};

/// The plug-in loaded with dlopen, with a host whose statuses are `tsrp_status` above.
struct Plugin {
  explicit Plugin(const char* path);
  ~Plugin();
  void* handle = nullptr;
  const tsrp_plugin* table = nullptr;
  std::string error;
};

const tsrp_host* test_host();

}  // namespace xnnpack_test
