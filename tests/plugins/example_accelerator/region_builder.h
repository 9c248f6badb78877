// Test helpers for the example accelerator plug-in (plugins/example_accelerator/):
// hand-built tsrp_graph views (RegionBuilder), a host that dlopens the plug-in
// and makes status objects (LoadedPlugin), and naive reference kernels.
//
// Contract: a RegionBuilder owns every struct, string and array it hands out
// at stable addresses, so a graph from graph() stays valid as long as the
// builder (and until the next graph() call, which rebuilds the pointer arrays).
// The references share no code with the plug-in.
#pragma once
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include <tessera/backend_plugin.h>

// The test host's status object.
struct tsrp_status {
  tsrp_status_code code;
  std::string message;
};

namespace example_accelerator_test {

class RegionBuilder {
 public:
  /// A value; rank -1 (dims ignored) for an unknown rank.
  int value(const std::string& name, std::vector<int64_t> dims, tsrp_dtype dtype = TSRP_FLOAT32, int32_t rank = -2) {
    Value& v = values_.emplace_back();
    v.name = name;
    v.dims = std::move(dims);
    v.value.struct_size = sizeof(tsrp_value);
    v.value.dtype = dtype;
    v.value.rank = rank == -2 ? static_cast<int32_t>(v.dims.size()) : rank;
    return static_cast<int>(values_.size() - 1);
  }
  int input(const std::string& name, std::vector<int64_t> dims, tsrp_dtype dtype = TSRP_FLOAT32) {
    const int v = value(name, std::move(dims), dtype);
    inputs_.push_back(v);
    return v;
  }
  int constant(const std::string& name, std::vector<int64_t> dims, std::vector<float> data) {
    const int v = value(name, std::move(dims));
    values_[v].data = std::move(data);
    return v;
  }
  void output(int v) { outputs_.push_back(v); }
  void set_inputs(std::vector<int32_t> inputs) { inputs_ = std::move(inputs); }
  /// Adds a node; returns its index. attr_* apply to the last node.
  int node(const std::string& op_type, std::vector<int> inputs, std::vector<int> outputs,
           const std::string& domain = "") {
    Node& n = nodes_.emplace_back();
    n.op_type = op_type;
    n.domain = domain;
    n.name = "n" + std::to_string(nodes_.size() - 1) + "_" + op_type;
    n.inputs.assign(inputs.begin(), inputs.end());
    n.outputs.assign(outputs.begin(), outputs.end());
    return static_cast<int>(nodes_.size() - 1);
  }
  void attr_int(const std::string& name, int64_t i) { add_attribute(name, TSRP_ATTR_INT).attribute.i = i; }
  void attr_float(const std::string& name, float f) { add_attribute(name, TSRP_ATTR_FLOAT).attribute.f = f; }
  void attr_string(const std::string& name, const std::string& s) { add_attribute(name, TSRP_ATTR_STRING).s = s; }
  void attr_graph(const std::string& name, const tsrp_graph* g) { add_attribute(name, TSRP_ATTR_GRAPH).attribute.graph = g; }

  const tsrp_graph* graph() {
    value_pointers_.clear();
    for (Value& v : values_) {
      v.value.name = v.name.c_str();
      v.value.dims = v.dims.data();
      v.value.constant = v.data.empty() ? nullptr : v.data.data();
      v.value.constant_bytes = v.data.size() * sizeof(float);
      value_pointers_.push_back(&v.value);
    }
    node_pointers_.clear();
    for (Node& n : nodes_) {
      n.node.struct_size = sizeof(tsrp_node);
      n.node.name = n.name.c_str();
      n.node.op_type = n.op_type.c_str();
      n.node.domain = n.domain.c_str();
      n.node.opset = 17;
      n.node.input_count = n.inputs.size();
      n.node.inputs = n.inputs.data();
      n.node.output_count = n.outputs.size();
      n.node.outputs = n.outputs.data();
      n.attribute_pointers.clear();
      for (Attribute* a : n.attributes) {
        a->attribute.name = a->name.c_str();
        a->attribute.s = a->s.c_str();
        a->attribute.s_length = a->s.size();
        n.attribute_pointers.push_back(&a->attribute);
      }
      n.node.attribute_count = n.attribute_pointers.size();
      n.node.attributes = n.attribute_pointers.data();
      node_pointers_.push_back(&n.node);
    }
    graph_.struct_size = sizeof(tsrp_graph);
    graph_.name = "region";
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

  std::vector<int64_t> dims(int v) const { return values_[v].dims; }

 private:
  struct Value {
    tsrp_value value{};
    std::string name;
    std::vector<int64_t> dims;
    std::vector<float> data;
  };
  struct Attribute {
    tsrp_attribute attribute{};
    std::string name, s;
  };
  struct Node {
    tsrp_node node{};
    std::string op_type, domain, name;
    std::vector<int32_t> inputs, outputs;
    std::vector<Attribute*> attributes;
    std::vector<const tsrp_attribute*> attribute_pointers;
  };
  Attribute& add_attribute(const std::string& name, tsrp_attribute_kind kind) {
    Attribute& a = attributes_.emplace_back();
    a.name = name;
    a.attribute.struct_size = sizeof(tsrp_attribute);
    a.attribute.kind = kind;
    nodes_.back().attributes.push_back(&a);
    return a;
  }
  std::deque<Value> values_;
  std::deque<Node> nodes_;
  std::deque<Attribute> attributes_;
  std::vector<const tsrp_value*> value_pointers_;
  std::vector<const tsrp_node*> node_pointers_;
  std::vector<int32_t> inputs_, outputs_;
  tsrp_graph graph_{};
};

inline tsrp_status* make_test_status(tsrp_status_code code, const char* message) {
  return new tsrp_status{code, message ? message : ""};
}

inline const tsrp_host* test_host(uint32_t abi_major = TSRP_ABI_MAJOR) {
  static tsrp_host hosts[4];
  tsrp_host& h = hosts[abi_major % 4];
  h = {sizeof(tsrp_host), abi_major, TSRP_ABI_MINOR, "test", &make_test_status};
  return &h;
}

/// The plug-in, dlopened once for the process.
struct LoadedPlugin {
  explicit LoadedPlugin(const char* path) {
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      error = dlerror();
      return;
    }
    entry = reinterpret_cast<tsrp_entry_point>(dlsym(handle, TSRP_ENTRY_POINT_NAME));
    live = reinterpret_cast<void (*)(int64_t*, int64_t*)>(dlsym(handle, "example_accelerator_live_allocations"));
    if (!entry || !live) {
      error = "missing exported functions";
      return;
    }
    table = entry(test_host());
    if (!table) error = "the plug-in declined the test host";
  }
  void* handle = nullptr;
  tsrp_entry_point entry = nullptr;
  void (*live)(int64_t*, int64_t*) = nullptr;
  const tsrp_plugin* table = nullptr;
  std::string error;
};

// ---------------------------------------------------------------- naive references

inline int64_t element_count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

/// numpy broadcasting by unravelling every output index (unlike the plug-in's strides).
inline std::vector<float> reference_binary(const std::vector<float>& a, const std::vector<int64_t>& da,
                                           const std::vector<float>& b, const std::vector<int64_t>& db, bool multiply,
                                           std::vector<int64_t>* out_dims = nullptr) {
  const size_t rank = std::max(da.size(), db.size());
  std::vector<int64_t> pa(rank, 1), pb(rank, 1), dout(rank);
  std::copy(da.begin(), da.end(), pa.begin() + (rank - da.size()));
  std::copy(db.begin(), db.end(), pb.begin() + (rank - db.size()));
  for (size_t i = 0; i < rank; ++i) dout[i] = std::max(pa[i], pb[i]);
  std::vector<float> out(element_count(dout));
  for (int64_t flat = 0; flat < static_cast<int64_t>(out.size()); ++flat) {
    int64_t rest = flat, ia = 0, ib = 0, sa = 1, sb = 1;
    for (size_t d = rank; d-- > 0;) {
      const int64_t coordinate = rest % dout[d];
      rest /= dout[d];
      ia += (pa[d] == 1 ? 0 : coordinate) * sa;
      ib += (pb[d] == 1 ? 0 : coordinate) * sb;
      sa *= pa[d];
      sb *= pb[d];
    }
    out[flat] = multiply ? a[ia] * b[ib] : a[ia] + b[ib];
  }
  if (out_dims) *out_dims = dout;
  return out;
}

/// a[m,k] x b ([k,n], or [n,k] when trans_b), accumulated in double.
inline std::vector<float> reference_matmul(const std::vector<float>& a, const std::vector<float>& b, int64_t m,
                                           int64_t k, int64_t n, bool trans_b = false) {
  std::vector<float> out(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += double(a[i * k + p]) * (trans_b ? b[j * k + p] : b[p * n + j]);
      out[i * n + j] = static_cast<float>(sum);
    }
  }
  return out;
}

inline std::vector<float> reference_relu(std::vector<float> x) {
  for (float& v : x) v = v < 0 ? 0 : v;  // NaN stays NaN, as numpy's maximum(x, 0)
  return x;
}

inline std::vector<float> reference_sigmoid(std::vector<float> x) {
  for (float& v : x) v = static_cast<float>(1.0 / (1.0 + std::exp(-double(v))));
  return x;
}

/// Seeded values in [lo, hi) (a small LCG: the same on every platform).
inline std::vector<float> random_values(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  uint32_t state = seed * 2654435761u + 1;
  for (float& x : v) {
    state = state * 1664525u + 1013904223u;
    x = lo + (hi - lo) * static_cast<float>(state >> 8) / static_cast<float>(1u << 24);
  }
  return v;
}

}  // namespace example_accelerator_test
