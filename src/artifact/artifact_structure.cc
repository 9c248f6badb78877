// Structural checks of a decoded artifact: the graph's invariants (through the
// IR verifier, recursively into subgraphs), each node against its op schema
// (arity, attribute kinds), and the partition against the graph (backends
// known, every node in exactly one region, composites inside their region,
// regions in an order that runs). A hostile artifact fails here with a user
// error instead of reaching shape inference or a kernel.
#include <algorithm>
#include <set>

#include "artifact/artifact_internal.h"
#include "ir/error.h"
#include "ir/op_schema.h"
#include "ir/verifier.h"

namespace tessera::artifact_internal {
namespace {

class StructureChecker {
 public:
  StructureChecker(const Artifact& artifact, const std::string& name) : artifact_(artifact), name_(name) {}

  void check() {
    check_graph(artifact_.graph, "");
    check_partition();
  }

 private:
  template <typename... Args>
  [[noreturn]] void fail(Args&&... args) const {
    throw_user_error("artifact '", name_, "': inconsistent plan: ", std::forward<Args>(args)...);
  }

  void check_graph(const Graph& graph, const std::string& where) {
    try {
      verify_graph(graph);
    } catch (const Error& error) {
      fail(where, error.what());
    }
    for (const Node& node : graph.nodes) {
      check_node_schema(node, where);
      for (const auto& [name, attribute] : node.attrs.all()) {
        if (attribute.kind == Attribute::Kind::kGraph && attribute.graph) {
          check_graph(*attribute.graph, str_cat(where, "subgraph '", name, "' of ", node.describe(), ": "));
        }
      }
    }
  }

  /// The importer guarantees these for every node; shape inference and kernels rely on them.
  void check_node_schema(const Node& node, const std::string& where) {
    const OpSchema* schema = OpRegistry::instance().find(node.domain, node.op_type);
    if (!schema) fail(where, node.describe(), ": unknown op (domain '", node.domain, "')");
    size_t formal = node.inputs.size();
    // Control-flow nodes append their subgraphs' captures after the formal inputs.
    if (const Attribute* a = node.attrs.find("tessera_formal_inputs")) {
      if (a->kind != Attribute::Kind::kInt || a->i < 0 || static_cast<uint64_t>(a->i) > node.inputs.size()) {
        fail(where, node.describe(), ": attribute 'tessera_formal_inputs' must be an int in [0, ", node.inputs.size(), "]");
      }
      formal = static_cast<size_t>(a->i);
    }
    size_t present = formal;
    while (present > 0 && node.inputs[present - 1] == kNoValue) --present;
    if (present < static_cast<size_t>(schema->min_inputs) || formal > static_cast<size_t>(schema->max_inputs)) {
      fail(where, node.describe(), ": has ", formal, " inputs, the op takes ", schema->min_inputs, " to ",
           schema->max_inputs);
    }
    if (node.outputs.size() < static_cast<size_t>(schema->min_outputs) ||
        node.outputs.size() > static_cast<size_t>(schema->max_outputs)) {
      fail(where, node.describe(), ": has ", node.outputs.size(), " outputs, the op gives ", schema->min_outputs, " to ",
           schema->max_outputs);
    }
    for (const AttributeSpec& spec : schema->attributes) {
      const Attribute* a = node.attrs.find(spec.name);
      if (!a) {
        if (spec.required) fail(where, node.describe(), ": required attribute '", spec.name, "' is missing");
        continue;
      }
      if (a->kind != spec.kind) {
        fail(where, node.describe(), ": attribute '", spec.name, "' is ", attribute_kind_name(a->kind), ", expected ",
             attribute_kind_name(spec.kind));
      }
    }
  }

  void check_partition() {
    const Graph& graph = artifact_.graph;
    const size_t node_count = graph.nodes.size();
    std::set<std::string> backend_names;
    for (const std::string& backend : artifact_.backends) {
      if (!backend_names.insert(backend).second) fail("backend '", backend, "' is listed twice");
    }
    constexpr size_t kNone = static_cast<size_t>(-1);
    std::vector<size_t> region_of(node_count, kNone);
    std::vector<size_t> position(node_count, 0);
    std::vector<size_t> region_backend(artifact_.regions.size(), 0);
    for (size_t r = 0; r < artifact_.regions.size(); ++r) {
      const ArtifactRegion& region = artifact_.regions[r];
      auto it = std::find(artifact_.backends.begin(), artifact_.backends.end(), region.backend);
      if (it == artifact_.backends.end()) fail("region ", r, " uses backend '", region.backend, "', which is not listed");
      region_backend[r] = static_cast<size_t>(it - artifact_.backends.begin());
      if (region.nodes.empty()) fail("region ", r, " has no nodes");
      for (size_t p = 0; p < region.nodes.size(); ++p) {
        size_t n = region.nodes[p];
        if (region_of[n] != kNone) {
          fail(graph.nodes[n].describe(), " is in region ", region_of[n], " and again in region ", r);
        }
        region_of[n] = r;
        position[n] = p;
      }
      std::set<size_t> in_composite;
      for (const Composite& composite : region.composites) {
        if (composite.nodes.empty()) fail("composite '", composite.pattern, "' of region ", r, " has no nodes");
        for (size_t n : composite.nodes) {
          if (region_of[n] != r) {
            fail("composite '", composite.pattern, "' of region ", r, " holds ", graph.nodes[n].describe(),
                 ", which is not in that region");
          }
          if (!in_composite.insert(n).second) fail(graph.nodes[n].describe(), " is in two composites of region ", r);
        }
      }
    }
    for (size_t n = 0; n < node_count; ++n) {
      if (region_of[n] == kNone) fail(graph.nodes[n].describe(), " is in no region");
    }
    check_region_order(region_of, position);
    if (artifact_.decisions.size() != node_count) {
      fail("there are ", artifact_.decisions.size(), " placement decisions for ", node_count, " nodes");
    }
    for (size_t n = 0; n < node_count; ++n) {
      const NodeDecision& decision = artifact_.decisions[n];
      if (decision.backend != region_backend[region_of[n]]) {
        fail("the decision for ", graph.nodes[n].describe(), " names backend ", decision.backend,
             " but its region runs on backend ", region_backend[region_of[n]]);
      }
      if (decision.refusals.size() != artifact_.backends.size()) {
        fail("the decision for ", graph.nodes[n].describe(), " has ", decision.refusals.size(), " refusals for ",
             artifact_.backends.size(), " backends");
      }
    }
  }

  /// Every value a node reads is produced by an earlier region, or earlier in its own region.
  void check_region_order(const std::vector<size_t>& region_of, const std::vector<size_t>& position) {
    const Graph& graph = artifact_.graph;
    std::vector<int64_t> producer(graph.values.size(), -1);
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      for (ValueId id : graph.nodes[n].outputs) {
        if (id != kNoValue) producer[static_cast<size_t>(id)] = static_cast<int64_t>(n);
      }
    }
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      for (ValueId id : graph.nodes[n].inputs) {
        if (id == kNoValue || producer[static_cast<size_t>(id)] < 0) continue;
        size_t from = static_cast<size_t>(producer[static_cast<size_t>(id)]);
        bool later_region = region_of[from] > region_of[n];
        bool later_in_region = region_of[from] == region_of[n] && position[from] > position[n];
        if (later_region || later_in_region) {
          fail(graph.nodes[n].describe(), " in region ", region_of[n], " reads '", graph.value(id).name,
               "' before ", graph.nodes[from].describe(), " in region ", region_of[from], " produces it");
        }
      }
    }
  }

  const Artifact& artifact_;
  const std::string& name_;
};

}  // namespace

void check_artifact_structure(const Artifact& artifact, const std::string& name) {
  StructureChecker(artifact, name).check();
  // Each compiled body's plan is a plan like the model's (its fed inputs are checked by the runtime,
  // against the body it is found for).
  for (size_t b = 0; b < artifact.bodies.size(); ++b) {
    check_artifact_structure(*artifact.bodies[b].plan, str_cat(name, "', compiled body ", b, " '", artifact.bodies[b].key));
  }
}

}  // namespace tessera::artifact_internal
