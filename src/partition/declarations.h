// What a backend declares it can run: per-op support checks that may inspect
// attributes, dtypes and shapes and say why they refuse, and fused patterns
// it prefers to take whole. A backend's declarations fit in one file:
//
//   Declarations d;
//   d.op({"Relu", "Sigmoid", "Tanh"}, inputs_have_dtype({DType::kFloat32}));
//   d.op("MatMul", all_of({inputs_have_dtype({DType::kFloat32}), static_shapes()}));
//   d.pattern("MatMulBiasRelu", op("Relu", {op("Add", {op("MatMul"), constant()})}));
//
// The partitioner (src/partition/partitioner.h) decides; declarations only propose.
#pragma once
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "partition/pattern.h"

namespace tessera {

/// A backend's answer for one node: it runs it, or it says why not.
struct SupportDecision {
  bool supported = false;
  std::string reason;  // why not, when unsupported
};

using SupportCheck = std::function<SupportDecision(const Graph&, const Node&)>;

struct DeclaredPattern {
  std::string name;
  Pattern root;
};

class Declarations {
 public:
  /// Claims nodes of `op_type` (ONNX default domain unless `domain` is given)
  /// that `check` accepts; without a check, every such node.
  Declarations& op(const std::string& op_type, SupportCheck check = {}, const std::string& domain = "");
  Declarations& op(std::initializer_list<std::string> op_types, SupportCheck check = {});
  /// Claims any node `check` accepts (for a backend that runs nearly everything).
  Declarations& any_op(SupportCheck check);
  /// A fused pattern taken whole as one composite node. Patterns are tried in
  /// the order declared, so declare larger ones first.
  Declarations& pattern(const std::string& name, Pattern root);

  /// Whether a single node (outside any pattern) is claimed, with the reason when not.
  SupportDecision supports(const Graph& graph, const Node& node) const;
  const std::vector<DeclaredPattern>& patterns() const { return patterns_; }
  /// Op types claimed by name ("*" when any_op was used), for reports.
  std::vector<std::string> declared_ops() const;

 private:
  struct OpRule {
    std::string domain;
    std::string op_type;  // empty for any_op
    SupportCheck check;
  };
  std::vector<OpRule> rules_;
  std::vector<DeclaredPattern> patterns_;
};

// Reusable checks. Each returns a reason naming the offending input, attribute or dim.
SupportCheck all_of(std::vector<SupportCheck> checks);
/// Every present input and output has one of `dtypes`.
SupportCheck tensors_have_dtype(std::vector<DType> dtypes);
/// Every present input and output has a static shape.
SupportCheck static_shapes();
/// Every present input and output has rank at most `rank`.
SupportCheck max_rank(int64_t rank);
/// Attribute `name` (or its absence meaning `fallback`) equals `value`.
SupportCheck attr_equals(const std::string& name, int64_t value, int64_t fallback);
/// Input `index` is present and a constant.
SupportCheck input_is_constant(size_t index);

}  // namespace tessera
