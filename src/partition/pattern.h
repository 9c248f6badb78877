// A small pattern language over the graph, for the fused patterns a backend
// declares (Conv→Add→Relu, MatMul→Add→Gelu, ...). A pattern is a DAG of
// pattern nodes rooted at the last op; it matches a set of graph nodes that
// then run as one composite node on the declaring backend.
//
//   Pattern x = any();                                   // a wildcard value
//   Pattern conv = op("Conv").where(float32_node);       // inputs unchecked
//   Pattern add = op("Add", {conv, any()});              // Add is commutative: either order
//   Pattern root = op_in({"Relu", "LeakyRelu"}, {add});  // alternatives of op type
//   Pattern gelu = op("Mul", {op("Mul", {x, op("Add", {op("Erf", {op("Div", {x, scalar(1.41421)})}), scalar(1)})}),
//                             scalar(0.5)});             // x used twice: a DAG
//
// Matching rules:
//  - An op pattern matches one node of one of its op types (default domain),
//    passing its attribute checks and predicate. With an input list, the node
//    must have exactly that many inputs (omitted optional inputs count as
//    absent and match only `absent()`), each matching the listed pattern; for
//    commutative ops (Add, Mul, Max, Min, Sum, And, Or, Xor, Equal, or any op
//    marked commutative()) two inputs may match in either order.
//  - any() matches any value; constant() a constant; scalar(v) a constant of
//    one element equal to v; absent() an omitted optional input; either(...)
//    the first alternative that matches.
//  - The same Pattern object used twice must bind the same value / node.
//  - Every output of a matched node other than the root must be read only by
//    matched nodes and must not be a graph output: the composite is then a
//    single-exit, convex piece of the graph (no path leaves and re-enters it).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

struct PatternNode;

/// A handle to a pattern node. Builder methods modify the node in place and
/// return the handle, so apply them before sharing the node in a DAG.
class Pattern {
 public:
  Pattern() = default;
  explicit Pattern(std::shared_ptr<PatternNode> node) : node_(std::move(node)) {}

  /// Node must have attribute `name` (or its default) equal to `value`.
  Pattern& attr(const std::string& name, int64_t value);
  Pattern& attr(const std::string& name, const std::string& value);
  /// Node must pass `check` (e.g. dtype or shape conditions).
  Pattern& where(std::function<bool(const Graph&, const Node&)> check);
  /// Inputs 0 and 1 may match in either order.
  Pattern& commutative();

  const PatternNode* get() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }

 private:
  std::shared_ptr<PatternNode> node_;
};

Pattern any();
Pattern constant();
Pattern scalar(double value, double tolerance = 1e-6);
Pattern absent();
/// An op with unchecked inputs (every input becomes an input of the composite).
Pattern op(const std::string& op_type);
Pattern op(const std::string& op_type, std::vector<Pattern> inputs);
Pattern op_in(std::vector<std::string> op_types);
Pattern op_in(std::vector<std::string> op_types, std::vector<Pattern> inputs);
Pattern either(std::vector<Pattern> alternatives);

/// A read-only look at one pattern node, for writing patterns out as data
/// (a C++ backend exported as a plug-in: src/backends/plugin_export/).
struct PatternInfo {
  enum class Kind { kAny, kConstant, kScalar, kAbsent, kOp, kEither };
  Kind kind = Kind::kAny;
  std::vector<std::string> op_types;  // kOp
  bool check_inputs = false;          // kOp: inputs listed
  std::vector<Pattern> inputs;        // kOp: inputs; kEither: alternatives
  double scalar_value = 0;            // kScalar
  double tolerance = 0;
  bool commutative = false;           // kOp
  bool has_conditions = false;        // kOp: attribute checks or where() predicates
  const void* identity = nullptr;     // equal for handles to the same node (a DAG's shared node)
};
PatternInfo describe_pattern(const Pattern& pattern);
/// Whether `node` passes op pattern `pattern`'s attribute checks and where()
/// predicates (its op type and inputs are not looked at).
bool pattern_conditions_hold(const Pattern& pattern, const Graph& graph, const Node& node);

/// Consumers of every value, built once per graph for matching.
struct GraphUses {
  explicit GraphUses(const Graph& graph);
  std::vector<std::vector<size_t>> consumers;  // per ValueId: node indices reading it
  std::vector<char> is_graph_output;           // per ValueId
  std::vector<int32_t> producer;               // per ValueId: node index, or -1
};

struct PatternMatch {
  std::vector<size_t> nodes;  // matched node indices, ascending (topological)
  size_t root = 0;            // the node matched by the pattern's root
};

/// Matches `pattern` with its root at graph.nodes[root]. `excluded` (when not
/// empty, one flag per node) marks nodes that may not be part of a match.
std::optional<PatternMatch> match_pattern(const Pattern& pattern, const Graph& graph, const GraphUses& uses,
                                          size_t root, const std::vector<char>& excluded = {});

}  // namespace tessera
