// The partitioner (see partitioner.h for the steps and guarantees).
#include "partition/partitioner.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <set>

#include "ir/error.h"
#include "ir/op_schema.h"
#include "partition/declarations.h"

namespace tessera {
namespace {

struct Selector {
  bool is_op = false;
  std::string name;
  std::string text;  // as the user wrote it, for reasons
  bool matches(const Node& node) const { return is_op ? node.op_type == name : node.name == name; }
};

Selector resolve_selector(const std::string& text, const Graph& graph, const char* option) {
  Selector s;
  s.text = text;
  if (text.rfind("op:", 0) == 0) {
    s.is_op = true;
    s.name = text.substr(3);
  } else if (text.rfind("node:", 0) == 0) {
    s.name = text.substr(5);
  } else {
    s.name = text;
    const bool is_node = std::any_of(graph.nodes.begin(), graph.nodes.end(), [&](const Node& n) { return n.name == text; });
    if (!is_node) {
      const bool is_op_in_graph =
          std::any_of(graph.nodes.begin(), graph.nodes.end(), [&](const Node& n) { return n.op_type == text; });
      if (!is_op_in_graph && !OpRegistry::instance().find("", text)) {
        throw_user_error(option, ": '", text, "' names no node of the model and no op type");
      }
      s.is_op = true;
    }
  }
  if (s.name.empty()) throw_user_error(option, ": empty selector in '", text, "'");
  if (!s.is_op && std::none_of(graph.nodes.begin(), graph.nodes.end(), [&](const Node& n) { return n.name == s.name; })) {
    throw_user_error(option, ": the model has no node named '", s.name, "'");
  }
  return s;
}

size_t backend_index(const std::vector<PartitionBackend>& backends, const std::string& name, const char* option) {
  for (size_t i = 0; i < backends.size(); ++i) {
    if (backends[i].name == name) return i;
  }
  std::string names;
  for (const PartitionBackend& b : backends) names += (names.empty() ? "" : ", ") + b.name;
  throw_user_error(option, ": backend '", name, "' is not among the backends in use (", names, ")");
}

/// True when a node reads or writes a sequence, an optional (ValueKind) or a string tensor.
bool touches_native_only_value(const Graph& graph, const Node& node) {
  auto native_only = [&](ValueId id) {
    return id != kNoValue && (!graph.value(id).type.is_tensor() || graph.value(id).type.dtype == DType::kString);
  };
  for (ValueId id : node.inputs) {
    if (native_only(id)) return true;
  }
  for (ValueId id : node.outputs) {
    if (native_only(id)) return true;
  }
  return false;
}

struct ResolvedPolicy {
  std::vector<std::pair<Selector, size_t>> place;  // selector → backend
  std::vector<std::pair<size_t, Selector>> deny;   // backend → selector
};

/// One pass of steps 1-3 with a given set of nodes demoted to the fallback.
class Partitioner {
 public:
  Partitioner(const Graph& graph, const std::vector<PartitionBackend>& backends, const PartitionPolicy& policy,
              const ResolvedPolicy& resolved, const GraphUses& uses)
      : graph_(graph), backends_(backends), policy_(policy), resolved_(resolved), uses_(uses) {
    const size_t n = graph.nodes.size();
    forced_.assign(n, -1);
    forced_text_.resize(n);
    for (size_t i = 0; i < n; ++i) {
      // A node-name selector beats an op-type one; two of the same kind that
      // disagree about a node are a user error.
      bool by_name = false;
      for (const auto& [selector, backend] : resolved.place) {
        if (!selector.matches(graph.nodes[i])) continue;
        const std::string text = selector.text + "=" + backends[backend].name;
        if (forced_[i] >= 0 && by_name == !selector.is_op && forced_[i] != static_cast<int>(backend)) {
          throw_user_error("--place ", forced_text_[i], " and --place ", text, " disagree about ", graph.nodes[i].describe());
        }
        if (forced_[i] >= 0 && by_name && selector.is_op) continue;
        forced_[i] = static_cast<int>(backend);
        forced_text_[i] = text;
        by_name = !selector.is_op;
      }
    }
    // Support is asked once per (node, backend); demotion only adds refusals.
    base_refusals_.assign(n, std::vector<std::string>(backends.size()));
    for (size_t i = 0; i < n; ++i) {
      for (size_t b = 0; b < backends.size(); ++b) {
        std::string& reason = base_refusals_[i][b];
        if (static_cast<int>(b) != policy.fallback && touches_native_only_value(graph, graph.nodes[i])) {
          reason = "it reads or makes a sequence, optional or string tensor, which only the fallback backend (" +
                   (policy.fallback >= 0 ? backends[static_cast<size_t>(policy.fallback)].name : std::string("none")) + ") takes";
          continue;
        }
        if (const Selector* s = denied(b, graph.nodes[i])) {
          reason = "denied by --deny " + backends[b].name + ":" + s->text;
          continue;
        }
        // A placement (--place, a tuning record) keeps the node there all the same (the refusal is then a warning).
        if (const CompileRefusal* r = forced_[i] == static_cast<int>(b) ? nullptr : refused_when_compiled(b, graph.nodes[i])) {
          reason = backends[b].name + " refused it when compiling it: " + r->reason;
          continue;
        }
        SupportDecision d = backends[b].declarations->supports(graph, graph.nodes[i]);
        if (!d.supported) reason = d.reason.empty() ? "refused" : d.reason;
      }
    }
  }

  const Selector* denied(size_t backend, const Node& node) const {
    for (const auto& [b, selector] : resolved_.deny) {
      if (b == backend && selector.matches(node)) return &selector;
    }
    return nullptr;
  }

  const CompileRefusal* refused_when_compiled(size_t backend, const Node& node) const {
    for (const CompileRefusal& r : policy_.compile_refusals) {
      if (r.backend == backends_[backend].name && r.node == node.name) return &r;
    }
    return nullptr;
  }

  bool is_forced(size_t node) const { return forced_[node] >= 0; }

  /// Steps 1-3. `demoted[i]` (with its reason) keeps node i off every backend but the fallback.
  PartitionResult run(const std::vector<std::string>& demoted) {
    const size_t n = graph_.nodes.size();
    PartitionResult result;
    for (const PartitionBackend& b : backends_) result.backends.push_back(b.name);
    result.decisions.resize(n);
    std::vector<int> assigned(n, -1);
    std::vector<int> composite_of(n, -1);
    std::vector<Composite> composites;
    std::vector<size_t> composite_backend;

    auto allowed_on = [&](size_t node, size_t backend) {
      if (forced_[node] >= 0) return forced_[node] == static_cast<int>(backend);
      if (!demoted[node].empty() && static_cast<int>(backend) != policy_.fallback) return false;
      return !denied(backend, graph_.nodes[node]);
    };

    // 1. Patterns, by backend priority, then declaration order. A pattern
    // never takes a node that a backend of higher priority claims on its own.
    std::vector<char> claimed_above(n, 0);
    for (size_t b = 0; b < backends_.size(); ++b) {
      std::vector<char> excluded(n, 0);
      // A node the backend refused when compiling it is not taken by its patterns either (unless placed there).
      for (size_t i = 0; i < n; ++i) {
        excluded[i] = assigned[i] >= 0 || !allowed_on(i, b) || (claimed_above[i] && forced_[i] < 0) ||
                      (forced_[i] != static_cast<int>(b) && refused_when_compiled(b, graph_.nodes[i]));
      }
      for (size_t i = 0; i < n; ++i) {
        if (base_refusals_[i][b].empty() && demoted[i].empty()) claimed_above[i] = 1;
      }
      for (const DeclaredPattern& pattern : backends_[b].declarations->patterns()) {
        for (size_t root = n; root-- > 0;) {
          if (excluded[root]) continue;
          std::optional<PatternMatch> match = match_pattern(pattern.root, graph_, uses_, root, excluded);
          if (!match) continue;
          const int index = static_cast<int>(composites.size());
          composites.push_back({pattern.name, match->nodes});
          composite_backend.push_back(b);
          for (size_t member : match->nodes) {
            assigned[member] = static_cast<int>(b);
            composite_of[member] = index;
            excluded[member] = 1;
            result.decisions[member].why =
                "pattern " + pattern.name + " (" + std::to_string(match->nodes.size()) + " nodes, root '" +
                graph_.nodes[match->root].name + "')";
          }
        }
      }
    }

    // 2. Annotation by predicates.
    std::vector<std::string> unclaimed;
    for (size_t i = 0; i < n; ++i) {
      NodeDecision& decision = result.decisions[i];
      decision.refusals = base_refusals_[i];
      if (!demoted[i].empty()) {
        for (size_t b = 0; b < backends_.size(); ++b) {
          if (static_cast<int>(b) != policy_.fallback && decision.refusals[b].empty()) decision.refusals[b] = demoted[i];
        }
      }
      if (assigned[i] >= 0) continue;
      const Node& node = graph_.nodes[i];
      if (forced_[i] >= 0) {
        const size_t b = static_cast<size_t>(forced_[i]);
        if (!base_refusals_[i][b].empty()) {
          throw_user_error("--place ", forced_text_[i], ": backend '", backends_[b].name, "' cannot run ",
                           node.describe(), ": ", base_refusals_[i][b]);
        }
        assigned[i] = static_cast<int>(b);
        decision.why = "placed by --place " + forced_text_[i];
        continue;
      }
      for (size_t b = 0; b < backends_.size(); ++b) {
        if (!decision.refusals[b].empty()) continue;
        assigned[i] = static_cast<int>(b);
        if (demoted[i].empty()) {
          // Below the first choice: say why each backend before it refused (a CPU without VNNI, ...).
          std::string refused;
          for (size_t higher = 0; higher < b; ++higher) {
            refused += "; " + backends_[higher].name + " refused: " + decision.refusals[higher];
          }
          decision.why = "claimed (priority " + std::to_string(b + 1) + " of " + std::to_string(backends_.size()) +
                         refused + ")";
        } else {
          decision.why = demoted[i];
        }
        break;
      }
      if (assigned[i] >= 0) continue;
      if (policy_.strict || policy_.fallback < 0) {
        std::string line = "  " + node.describe() + ":";
        for (size_t b = 0; b < backends_.size(); ++b) line += (b ? "; " : " ") + backends_[b].name + ": " + decision.refusals[b];
        unclaimed.push_back(line);
        continue;
      }
      throw_unsupported(node.describe(), ": no backend can run it:",
                        [&] {
                          std::string all;
                          for (size_t b = 0; b < backends_.size(); ++b) all += (b ? "; " : " ") + backends_[b].name + ": " + decision.refusals[b];
                          return all;
                        }());
    }
    if (!unclaimed.empty()) {
      std::string list;
      for (const std::string& line : unclaimed) list += "\n" + line;
      throw_user_error(policy_.strict ? "strict placement: " : "", unclaimed.size(),
                       " node(s) are not supported by the backends in use:", list);
    }
    for (size_t i = 0; i < n; ++i) result.decisions[i].backend = static_cast<size_t>(assigned[i]);

    // 3. Grouping: units (a node, or a composite) in a topological order that
    // stays on one backend while it can.
    std::vector<size_t> unit_of(n);
    std::vector<std::vector<size_t>> unit_nodes;
    for (size_t i = 0; i < n; ++i) {
      if (composite_of[i] >= 0 && composites[static_cast<size_t>(composite_of[i])].nodes.front() != i) {
        unit_of[i] = unit_of[composites[static_cast<size_t>(composite_of[i])].nodes.front()];
        unit_nodes[unit_of[i]].push_back(i);
        continue;
      }
      unit_of[i] = unit_nodes.size();
      unit_nodes.push_back({i});
    }
    const size_t units = unit_nodes.size();
    std::vector<std::vector<size_t>> successors(units);
    std::vector<size_t> indegree(units, 0);
    for (size_t i = 0; i < n; ++i) {
      for (ValueId out : graph_.nodes[i].outputs) {
        if (out == kNoValue) continue;
        for (size_t consumer : uses_.consumers[static_cast<size_t>(out)]) {
          const size_t from = unit_of[i];
          const size_t to = unit_of[consumer];
          if (from == to) continue;
          std::vector<size_t>& list = successors[from];
          if (std::find(list.begin(), list.end(), to) != list.end()) continue;
          list.push_back(to);
          ++indegree[to];
        }
      }
    }
    using MinHeap = std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>>;
    std::vector<MinHeap> ready(backends_.size());
    auto unit_backend = [&](size_t u) { return static_cast<size_t>(assigned[unit_nodes[u].front()]); };
    for (size_t u = 0; u < units; ++u) {
      if (indegree[u] == 0) ready[unit_backend(u)].push(u);
    }
    size_t current = backends_.size();
    for (size_t done = 0; done < units; ++done) {
      if (current == backends_.size() || ready[current].empty()) {
        // Switch to the backend whose earliest ready unit comes first in the graph.
        current = backends_.size();
        for (size_t b = 0; b < backends_.size(); ++b) {
          if (!ready[b].empty() && (current == backends_.size() || ready[b].top() < ready[current].top())) current = b;
        }
        if (current == backends_.size()) throw_internal_error("partitioner: the graph has a cycle");
        result.regions.push_back(Region{});
        result.regions.back().backend = current;
      }
      const size_t u = ready[current].top();
      ready[current].pop();
      Region& region = result.regions.back();
      for (size_t node : unit_nodes[u]) region.nodes.push_back(node);
      if (composite_of[unit_nodes[u].front()] >= 0) {
        region.composites.push_back(composites[static_cast<size_t>(composite_of[unit_nodes[u].front()])]);
      }
      for (size_t next : successors[u]) {
        if (--indegree[next] == 0) ready[unit_backend(next)].push(next);
      }
    }
    result.region_of_node.assign(n, 0);
    for (size_t r = 0; r < result.regions.size(); ++r) {
      for (size_t node : result.regions[r].nodes) result.region_of_node[node] = r;
    }
    return result;
  }

 private:
  const Graph& graph_;
  const std::vector<PartitionBackend>& backends_;
  const PartitionPolicy& policy_;
  const ResolvedPolicy& resolved_;
  const GraphUses& uses_;
  std::vector<int> forced_;
  std::vector<std::string> forced_text_;
  std::vector<std::vector<std::string>> base_refusals_;
};

}  // namespace

PartitionResult partition_graph(const Graph& graph, const std::vector<PartitionBackend>& backends,
                                const PartitionPolicy& policy) {
  if (backends.empty()) throw_user_error("no backends to partition the graph among");
  if (policy.fallback >= static_cast<int>(backends.size())) throw_internal_error("partitioner: fallback out of range");
  if (policy.min_region_size < 1) throw_user_error("the minimum region size must be at least 1");
  ResolvedPolicy resolved;
  for (const auto& [selector, backend] : policy.place) {
    resolved.place.push_back({resolve_selector(selector, graph, "--place"), backend_index(backends, backend, "--place")});
  }
  for (const auto& [backend, selector] : policy.deny) {
    resolved.deny.push_back({backend_index(backends, backend, "--deny"), resolve_selector(selector, graph, "--deny")});
  }
  GraphUses uses(graph);
  Partitioner partitioner(graph, backends, policy, resolved, uses);
  std::vector<std::string> demoted(graph.nodes.size());
  PartitionResult result;
  for (;;) {
    result = partitioner.run(demoted);
    if (policy.min_region_size <= 1 || policy.fallback < 0) break;
    // 4. Regions too small for their backend go to the fallback; redo 1-3.
    bool changed = false;
    for (const Region& region : result.regions) {
      if (static_cast<int>(region.backend) == policy.fallback) continue;
      if (static_cast<int>(region.nodes.size()) >= policy.min_region_size) continue;
      for (size_t node : region.nodes) {
        if (partitioner.is_forced(node) || !demoted[node].empty()) continue;
        demoted[node] = "region on " + backends[region.backend].name + " too small (" +
                        std::to_string(region.nodes.size()) + " < " + std::to_string(policy.min_region_size) +
                        " nodes), fell back to " + backends[static_cast<size_t>(policy.fallback)].name;
        changed = true;
      }
    }
    if (!changed) break;
  }
  compute_region_boundaries(graph, result);
  return result;
}

void compute_region_boundaries(const Graph& graph, PartitionResult& result) {
  const size_t num_values = graph.values.size();
  std::vector<int64_t> producer_region(num_values, -1);
  for (size_t r = 0; r < result.regions.size(); ++r) {
    for (size_t node : result.regions[r].nodes) {
      for (ValueId out : graph.nodes[node].outputs) {
        if (out != kNoValue) producer_region[static_cast<size_t>(out)] = static_cast<int64_t>(r);
      }
    }
  }
  std::vector<char> needed_outside(num_values, 0);
  for (ValueId id : graph.outputs) needed_outside[static_cast<size_t>(id)] = 1;
  for (size_t r = 0; r < result.regions.size(); ++r) {
    Region& region = result.regions[r];
    region.inputs.clear();
    std::set<ValueId> seen;
    for (size_t node : region.nodes) {
      for (ValueId in : graph.nodes[node].inputs) {
        if (in == kNoValue || graph.is_constant(in)) continue;
        if (producer_region[static_cast<size_t>(in)] == static_cast<int64_t>(r)) continue;
        if (producer_region[static_cast<size_t>(in)] >= 0) needed_outside[static_cast<size_t>(in)] = 1;
        if (seen.insert(in).second) region.inputs.push_back(in);
      }
    }
  }
  for (size_t r = 0; r < result.regions.size(); ++r) {
    Region& region = result.regions[r];
    region.outputs.clear();
    for (size_t node : region.nodes) {
      for (ValueId out : graph.nodes[node].outputs) {
        if (out != kNoValue && needed_outside[static_cast<size_t>(out)]) region.outputs.push_back(out);
      }
    }
  }
}

void check_partition(const Graph& graph, const PartitionResult& result) {
  const size_t n = graph.nodes.size();
  std::vector<int64_t> region_of(n, -1);
  for (size_t r = 0; r < result.regions.size(); ++r) {
    const Region& region = result.regions[r];
    if (region.backend >= result.backends.size()) throw_user_error("region ", r, " names backend ", region.backend, ", which does not exist");
    if (region.nodes.empty()) throw_user_error("region ", r, " has no nodes");
    for (size_t node : region.nodes) {
      if (node >= n) throw_user_error("region ", r, " lists node ", node, ", which does not exist");
      if (region_of[node] >= 0) throw_user_error("node '", graph.nodes[node].name, "' is in regions ", region_of[node], " and ", r);
      region_of[node] = static_cast<int64_t>(r);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    if (region_of[i] < 0) throw_user_error("node '", graph.nodes[i].name, "' is in no region");
  }
  // Running the regions in order, each node's inputs must already exist:
  // this also rules out any cycle between regions.
  std::vector<char> defined(graph.values.size(), 0);
  for (ValueId id : graph.inputs) defined[static_cast<size_t>(id)] = 1;
  for (size_t v = 0; v < graph.values.size(); ++v) {
    if (graph.values[v].constant) defined[v] = 1;
  }
  GraphUses uses(graph);
  for (size_t r = 0; r < result.regions.size(); ++r) {
    const Region& region = result.regions[r];
    std::vector<int64_t> position(n, -1);
    for (size_t k = 0; k < region.nodes.size(); ++k) position[region.nodes[k]] = static_cast<int64_t>(k);
    for (size_t node : region.nodes) {
      for (ValueId in : graph.nodes[node].inputs) {
        if (in == kNoValue || defined[static_cast<size_t>(in)]) continue;
        throw_user_error("region ", r, " (", result.backends[region.backend], "): node '", graph.nodes[node].name,
                         "' reads '", graph.value(in).name, "' before it is computed (regions out of order or cyclic)");
      }
      for (ValueId out : graph.nodes[node].outputs) {
        if (out != kNoValue) defined[static_cast<size_t>(out)] = 1;
      }
    }
    for (const Composite& composite : region.composites) {
      if (composite.nodes.empty()) throw_user_error("region ", r, ": composite '", composite.pattern, "' has no nodes");
      int64_t first = -1;
      for (size_t k = 0; k < composite.nodes.size(); ++k) {
        const size_t node = composite.nodes[k];
        if (node >= n || region_of[node] != static_cast<int64_t>(r)) {
          throw_user_error("region ", r, ": composite '", composite.pattern, "' lists a node outside the region");
        }
        if (k == 0) first = position[node];
        if (position[node] != first + static_cast<int64_t>(k)) {
          throw_user_error("region ", r, ": composite '", composite.pattern, "' is not contiguous in the region");
        }
      }
      std::vector<size_t> members = composite.nodes;
      std::sort(members.begin(), members.end());
      for (size_t node : composite.nodes) {
        if (node == composite.nodes.back()) continue;
        for (ValueId out : graph.nodes[node].outputs) {
          if (out == kNoValue) continue;
          bool escapes = uses.is_graph_output[static_cast<size_t>(out)] != 0;
          for (size_t consumer : uses.consumers[static_cast<size_t>(out)]) {
            escapes |= !std::binary_search(members.begin(), members.end(), consumer);
          }
          if (escapes) {
            throw_user_error("region ", r, ": composite '", composite.pattern, "' lets '", graph.value(out).name,
                             "' escape (only its last node's outputs may be read outside it)");
          }
        }
      }
    }
  }
}

std::vector<Composite> match_composites(const Graph& graph, const GraphUses& uses, const std::vector<size_t>& nodes,
                                        const Declarations& declarations) {
  const size_t n = graph.nodes.size();
  std::vector<char> excluded(n, 1);
  std::vector<int64_t> position(n, -1);  // in `nodes`
  for (size_t i = 0; i < nodes.size(); ++i) {
    excluded[nodes[i]] = 0;
    position[nodes[i]] = static_cast<int64_t>(i);
  }
  std::vector<Composite> composites;
  for (const DeclaredPattern& pattern : declarations.patterns()) {
    for (size_t i = nodes.size(); i-- > 0;) {
      const size_t root = nodes[i];
      if (excluded[root]) continue;
      std::optional<PatternMatch> match = match_pattern(pattern.root, graph, uses, root, excluded);
      if (!match) continue;
      int64_t first = static_cast<int64_t>(nodes.size());
      for (size_t member : match->nodes) first = std::min(first, position[member]);
      bool ready = true;
      for (size_t member : match->nodes) {
        for (ValueId in : graph.nodes[member].inputs) {
          if (in == kNoValue) continue;
          const int32_t producer = uses.producer[static_cast<size_t>(in)];
          if (producer < 0 || std::find(match->nodes.begin(), match->nodes.end(), static_cast<size_t>(producer)) !=
                                  match->nodes.end()) {
            continue;
          }
          ready &= position[static_cast<size_t>(producer)] < first;  // (outside `nodes`: -1, made before)
        }
      }
      if (!ready) continue;
      for (size_t member : match->nodes) excluded[member] = 1;
      composites.push_back({pattern.name, match->nodes});
    }
  }
  return composites;
}

}  // namespace tessera
