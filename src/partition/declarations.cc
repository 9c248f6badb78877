// Backend declarations: per-op support rules, fused patterns and the
// reusable checks backends build their rules from (see declarations.h).
#include "partition/declarations.h"

#include <algorithm>

namespace tessera {
namespace {

/// "input 1 'bias'" / "output 0 'y'" for reasons.
std::string label(const Graph& graph, const char* kind, size_t index, ValueId id) {
  return std::string(kind) + " " + std::to_string(index) + " '" + graph.value(id).name + "'";
}

/// Calls f(label, value) for each present input and output; stops at the first refusal.
template <typename F>
SupportDecision for_each_tensor(const Graph& graph, const Node& node, F f) {
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue) continue;
    SupportDecision d = f(label(graph, "input", i, node.inputs[i]), graph.value(node.inputs[i]));
    if (!d.supported) return d;
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i] == kNoValue) continue;
    SupportDecision d = f(label(graph, "output", i, node.outputs[i]), graph.value(node.outputs[i]));
    if (!d.supported) return d;
  }
  return {true, ""};
}

}  // namespace

Declarations& Declarations::op(const std::string& op_type, SupportCheck check, const std::string& domain) {
  rules_.push_back({domain, op_type, std::move(check)});
  return *this;
}

Declarations& Declarations::op(std::initializer_list<std::string> op_types, SupportCheck check) {
  for (const std::string& op_type : op_types) rules_.push_back({"", op_type, check});
  return *this;
}

Declarations& Declarations::any_op(SupportCheck check) {
  rules_.push_back({"", "", std::move(check)});
  return *this;
}

Declarations& Declarations::pattern(const std::string& name, Pattern root) {
  patterns_.push_back({name, std::move(root)});
  return *this;
}

SupportDecision Declarations::supports(const Graph& graph, const Node& node) const {
  SupportDecision last{false, node.op_type + (node.domain.empty() ? "" : " (domain " + node.domain + ")") +
                                  " is not declared"};
  for (const OpRule& rule : rules_) {
    const bool applies = rule.op_type.empty() || (rule.op_type == node.op_type && rule.domain == node.domain);
    if (!applies) continue;
    if (!rule.check) return {true, ""};
    SupportDecision d = rule.check(graph, node);
    if (d.supported) return d;
    last = std::move(d);
  }
  return last;
}

std::vector<std::string> Declarations::declared_ops() const {
  std::vector<std::string> ops;
  for (const OpRule& rule : rules_) {
    std::string name = rule.op_type.empty() ? "*" : rule.op_type;
    if (std::find(ops.begin(), ops.end(), name) == ops.end()) ops.push_back(name);
  }
  return ops;
}

SupportCheck all_of(std::vector<SupportCheck> checks) {
  return [checks = std::move(checks)](const Graph& graph, const Node& node) -> SupportDecision {
    for (const SupportCheck& check : checks) {
      SupportDecision d = check(graph, node);
      if (!d.supported) return d;
    }
    return {true, ""};
  };
}

SupportCheck tensors_have_dtype(std::vector<DType> dtypes) {
  return [dtypes = std::move(dtypes)](const Graph& graph, const Node& node) {
    return for_each_tensor(graph, node, [&](const std::string& what, const Value& v) -> SupportDecision {
      if (std::find(dtypes.begin(), dtypes.end(), v.type.dtype) != dtypes.end()) return {true, ""};
      std::string allowed;
      for (DType d : dtypes) allowed += (allowed.empty() ? "" : ", ") + std::string(dtype_name(d));
      return {false, what + " is " + dtype_name(v.type.dtype) + "; supported: " + allowed};
    });
  };
}

SupportCheck static_shapes() {
  return [](const Graph& graph, const Node& node) {
    return for_each_tensor(graph, node, [&](const std::string& what, const Value& v) -> SupportDecision {
      if (v.type.is_static()) return {true, ""};
      return {false, what + " has a shape known only at run time (" + v.type.to_string() + ")"};
    });
  };
}

SupportCheck max_rank(int64_t rank) {
  return [rank](const Graph& graph, const Node& node) {
    return for_each_tensor(graph, node, [&](const std::string& what, const Value& v) -> SupportDecision {
      if (v.type.rank_known && v.type.rank() <= rank) return {true, ""};
      return {false, what + " has rank " + (v.type.rank_known ? std::to_string(v.type.rank()) : "?") +
                         "; at most " + std::to_string(rank) + " is supported"};
    });
  };
}

SupportCheck attr_equals(const std::string& name, int64_t value, int64_t fallback) {
  return [name, value, fallback](const Graph&, const Node& node) -> SupportDecision {
    const int64_t actual = node.attrs.get_int_or(name, fallback);
    if (actual == value) return {true, ""};
    return {false, "attribute " + name + " = " + std::to_string(actual) + "; only " + std::to_string(value) +
                       " is supported"};
  };
}

SupportCheck input_is_constant(size_t index) {
  return [index](const Graph& graph, const Node& node) -> SupportDecision {
    if (node.has_input(index) && graph.is_constant(node.inputs[index])) return {true, ""};
    if (!node.has_input(index)) return {false, "input " + std::to_string(index) + " is absent"};
    return {false, label(graph, "input", index, node.inputs[index]) + " is not a constant"};
  };
}

}  // namespace tessera
