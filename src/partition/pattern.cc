// The pattern language's builders and its backtracking matcher (see pattern.h).
#include "partition/pattern.h"

#include <algorithm>
#include <cmath>

namespace tessera {

struct PatternNode {
  enum class Kind { kAny, kConstant, kScalar, kAbsent, kOp, kEither };
  Kind kind = Kind::kAny;
  std::vector<std::string> op_types;  // kOp
  bool check_inputs = false;          // kOp: inputs listed
  std::vector<Pattern> inputs;        // kOp
  std::vector<Pattern> alternatives;  // kEither
  double scalar_value = 0;            // kScalar
  double tolerance = 0;
  std::vector<std::pair<std::string, int64_t>> int_attrs;
  std::vector<std::pair<std::string, std::string>> string_attrs;
  std::vector<std::function<bool(const Graph&, const Node&)>> checks;
  bool commutative = false;
};

namespace {

Pattern make(PatternNode::Kind kind) {
  auto node = std::make_shared<PatternNode>();
  node->kind = kind;
  return Pattern(node);
}

bool node_attributes_match(const PatternNode* p, const Node& node) {
  for (const auto& [name, value] : p->int_attrs) {
    const Attribute* a = node.attrs.find(name);
    if (!a || a->kind != Attribute::Kind::kInt || a->i != value) return false;
  }
  for (const auto& [name, value] : p->string_attrs) {
    const Attribute* a = node.attrs.find(name);
    if (!a || a->kind != Attribute::Kind::kString || a->s != value) return false;
  }
  return true;
}

bool commutative_by_default(const std::string& op_type) {
  static const char* const kOps[] = {"Add", "Mul", "Max", "Min", "Sum", "And", "Or", "Xor", "Equal"};
  return std::any_of(std::begin(kOps), std::end(kOps), [&](const char* name) { return op_type == name; });
}

Pattern make_op(std::vector<std::string> op_types, std::vector<Pattern> inputs, bool check_inputs) {
  Pattern p = make(PatternNode::Kind::kOp);
  auto* node = const_cast<PatternNode*>(p.get());
  node->commutative = !op_types.empty() && std::all_of(op_types.begin(), op_types.end(), commutative_by_default);
  node->op_types = std::move(op_types);
  node->inputs = std::move(inputs);
  node->check_inputs = check_inputs;
  return p;
}

/// Backtracking matcher. Bindings are a trail of (pattern node, value or node
/// index); a failed branch truncates the trail back to where it started.
class Matcher {
 public:
  Matcher(const Graph& graph, const GraphUses& uses, const std::vector<char>& excluded)
      : graph_(graph), uses_(uses), excluded_(excluded) {}

  using Continuation = std::function<bool()>;

  bool match_node(const PatternNode* p, size_t node_index, const Continuation& next) {
    if (p->kind == PatternNode::Kind::kEither) {
      for (const Pattern& alternative : p->alternatives) {
        const size_t mark = trail_.size();
        if (match_node(alternative.get(), node_index, next)) return true;
        trail_.resize(mark);
      }
      return false;
    }
    if (p->kind != PatternNode::Kind::kOp) return false;
    if (const int64_t* bound = find_binding(p)) return *bound == static_cast<int64_t>(node_index) && next();
    if (node_taken(node_index)) return false;
    if (!excluded_.empty() && excluded_[node_index]) return false;
    const Node& node = graph_.nodes[node_index];
    if (!node.domain.empty()) return false;
    if (std::find(p->op_types.begin(), p->op_types.end(), node.op_type) == p->op_types.end()) return false;
    if (!attributes_match(p, node)) return false;
    for (const auto& check : p->checks) {
      if (!check(graph_, node)) return false;
    }
    const size_t mark = trail_.size();
    trail_.push_back({p, static_cast<int64_t>(node_index), true});
    bool ok;
    if (!p->check_inputs) {
      ok = next();
    } else if (node.inputs.size() != p->inputs.size()) {
      ok = false;
    } else {
      std::vector<size_t> order(p->inputs.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      ok = match_inputs(p, node, order, 0, next);
      if (!ok && p->commutative && order.size() >= 2) {
        trail_.resize(mark + 1);
        std::swap(order[0], order[1]);
        ok = match_inputs(p, node, order, 0, next);
      }
    }
    if (!ok) trail_.resize(mark);
    return ok;
  }

  bool match_value(const PatternNode* p, ValueId value, const Continuation& next) {
    switch (p->kind) {
      case PatternNode::Kind::kAbsent:
        return value == kNoValue && next();
      case PatternNode::Kind::kEither:
        for (const Pattern& alternative : p->alternatives) {
          const size_t mark = trail_.size();
          if (match_value(alternative.get(), value, next)) return true;
          trail_.resize(mark);
        }
        return false;
      case PatternNode::Kind::kOp: {
        if (value == kNoValue) return false;
        const int32_t producer = uses_.producer[static_cast<size_t>(value)];
        if (producer < 0) return false;
        return match_node(p, static_cast<size_t>(producer), next);
      }
      default:
        break;
    }
    if (value == kNoValue) return false;
    if (const int64_t* bound = find_binding(p)) return *bound == value && next();
    if (p->kind == PatternNode::Kind::kConstant && !graph_.is_constant(value)) return false;
    if (p->kind == PatternNode::Kind::kScalar && !is_scalar(value, p->scalar_value, p->tolerance)) return false;
    const size_t mark = trail_.size();
    trail_.push_back({p, value, false});
    if (next()) return true;
    trail_.resize(mark);
    return false;
  }

  std::vector<size_t> matched_nodes() const {
    std::vector<size_t> nodes;
    for (const Binding& b : trail_) {
      if (b.is_node) nodes.push_back(static_cast<size_t>(b.id));
    }
    std::sort(nodes.begin(), nodes.end());
    return nodes;
  }

 private:
  struct Binding {
    const PatternNode* pattern;
    int64_t id;  // node index for op patterns, value id otherwise
    bool is_node;
  };

  bool match_inputs(const PatternNode* p, const Node& node, const std::vector<size_t>& order, size_t i,
                    const Continuation& next) {
    if (i == order.size()) return next();
    return match_value(p->inputs[i].get(), node.inputs[order[i]],
                       [&]() { return match_inputs(p, node, order, i + 1, next); });
  }

  const int64_t* find_binding(const PatternNode* p) const {
    for (const Binding& b : trail_) {
      if (b.pattern == p) return &b.id;
    }
    return nullptr;
  }

  bool node_taken(size_t node_index) const {
    for (const Binding& b : trail_) {
      if (b.is_node && b.id == static_cast<int64_t>(node_index)) return true;
    }
    return false;
  }

  bool attributes_match(const PatternNode* p, const Node& node) const { return node_attributes_match(p, node); }

  bool is_scalar(ValueId value, double expected, double tolerance) const {
    if (!graph_.is_constant(value)) return false;
    const Tensor& t = *graph_.value(value).constant;
    if (t.numel() != 1 || !dtype_is_float(t.dtype())) return false;
    const double actual = t.double_at(0);
    return std::fabs(actual - expected) <= tolerance * std::max(1.0, std::fabs(expected));
  }

  const Graph& graph_;
  const GraphUses& uses_;
  const std::vector<char>& excluded_;
  std::vector<Binding> trail_;
};

}  // namespace

Pattern& Pattern::attr(const std::string& name, int64_t value) {
  node_->int_attrs.emplace_back(name, value);
  return *this;
}

Pattern& Pattern::attr(const std::string& name, const std::string& value) {
  node_->string_attrs.emplace_back(name, value);
  return *this;
}

Pattern& Pattern::where(std::function<bool(const Graph&, const Node&)> check) {
  node_->checks.push_back(std::move(check));
  return *this;
}

Pattern& Pattern::commutative() {
  node_->commutative = true;
  return *this;
}

Pattern any() { return make(PatternNode::Kind::kAny); }
Pattern constant() { return make(PatternNode::Kind::kConstant); }
Pattern absent() { return make(PatternNode::Kind::kAbsent); }

Pattern scalar(double value, double tolerance) {
  Pattern p = make(PatternNode::Kind::kScalar);
  auto* node = const_cast<PatternNode*>(p.get());
  node->scalar_value = value;
  node->tolerance = tolerance;
  return p;
}

Pattern op(const std::string& op_type) { return make_op({op_type}, {}, false); }
Pattern op(const std::string& op_type, std::vector<Pattern> inputs) { return make_op({op_type}, std::move(inputs), true); }
Pattern op_in(std::vector<std::string> op_types) { return make_op(std::move(op_types), {}, false); }
Pattern op_in(std::vector<std::string> op_types, std::vector<Pattern> inputs) {
  return make_op(std::move(op_types), std::move(inputs), true);
}

Pattern either(std::vector<Pattern> alternatives) {
  Pattern p = make(PatternNode::Kind::kEither);
  const_cast<PatternNode*>(p.get())->alternatives = std::move(alternatives);
  return p;
}

GraphUses::GraphUses(const Graph& graph)
    : consumers(graph.values.size()), is_graph_output(graph.values.size(), 0), producer(graph.values.size(), -1) {
  for (size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    for (ValueId id : node.inputs) {
      if (id == kNoValue) continue;
      std::vector<size_t>& list = consumers[static_cast<size_t>(id)];
      if (list.empty() || list.back() != n) list.push_back(n);
    }
    for (ValueId id : node.outputs) {
      if (id != kNoValue) producer[static_cast<size_t>(id)] = static_cast<int32_t>(n);
    }
  }
  for (ValueId id : graph.outputs) is_graph_output[static_cast<size_t>(id)] = 1;
}

std::optional<PatternMatch> match_pattern(const Pattern& pattern, const Graph& graph, const GraphUses& uses,
                                          size_t root, const std::vector<char>& excluded) {
  if (!pattern || root >= graph.nodes.size()) return std::nullopt;
  Matcher matcher(graph, uses, excluded);
  PatternMatch result;
  // The final check runs inside the search, so a binding that leaks an
  // intermediate value makes the matcher try the next alternative.
  auto single_exit = [&]() {
    std::vector<size_t> nodes = matcher.matched_nodes();
    for (size_t n : nodes) {
      if (n == root) continue;
      for (ValueId out : graph.nodes[n].outputs) {
        if (out == kNoValue) continue;
        if (uses.is_graph_output[static_cast<size_t>(out)]) return false;
        for (size_t consumer : uses.consumers[static_cast<size_t>(out)]) {
          if (!std::binary_search(nodes.begin(), nodes.end(), consumer)) return false;
        }
      }
    }
    result.nodes = std::move(nodes);
    return true;
  };
  if (!matcher.match_node(pattern.get(), root, single_exit)) return std::nullopt;
  result.root = root;
  return result;
}

PatternInfo describe_pattern(const Pattern& pattern) {
  const PatternNode* p = pattern.get();
  PatternInfo info;
  if (!p) return info;
  info.kind = static_cast<PatternInfo::Kind>(p->kind);
  info.op_types = p->op_types;
  info.check_inputs = p->check_inputs;
  info.inputs = p->kind == PatternNode::Kind::kEither ? p->alternatives : p->inputs;
  info.scalar_value = p->scalar_value;
  info.tolerance = p->tolerance;
  info.commutative = p->commutative;
  info.has_conditions = !p->int_attrs.empty() || !p->string_attrs.empty() || !p->checks.empty();
  info.identity = p;
  return info;
}

bool pattern_conditions_hold(const Pattern& pattern, const Graph& graph, const Node& node) {
  const PatternNode* p = pattern.get();
  if (!p || !node_attributes_match(p, node)) return false;
  for (const auto& check : p->checks) {
    if (!check(graph, node)) return false;
  }
  return true;
}

}  // namespace tessera
