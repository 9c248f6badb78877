// The partitioner: priority, policies, strict mode, minimum region size,
// extraction, and a property test over random graphs and random support
// sets that no partition has a cycle between regions.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>

#include "ir/error.h"
#include "partition/declarations.h"
#include "partition/partitioner.h"
#include "partition/pattern.h"
#include "partition_test_util.h"
#include "unit/expect_error.h"

namespace tessera {
namespace {

using testing_partition::GraphBuilder;

/// Declarations claiming the listed op types (every node of those types).
Declarations claims(std::initializer_list<std::string> ops) {
  Declarations d;
  d.op(ops);
  return d;
}

Declarations claims_everything() {
  Declarations d;
  d.any_op([](const Graph&, const Node&) { return SupportDecision{true, ""}; });
  return d;
}

/// x → Relu → Exp → Add(·, x) → Relu → Softmax → y
Graph chain() {
  GraphBuilder b;
  ValueId x = b.input("x");
  ValueId r = b.node("Relu", {x});
  ValueId e = b.node("Exp", {r});
  ValueId a = b.node("Add", {e, x});
  ValueId r2 = b.node("Relu", {a});
  b.output(b.node("Softmax", {r2}));
  return b.graph;
}

std::string backend_of(const PartitionResult& p, size_t node) {
  return p.backends[p.regions[p.region_of_node[node]].backend];
}

/// Independent of check_partition: builds the region graph's edges and looks for a cycle.
bool region_graph_has_cycle(const Graph& g, const PartitionResult& p) {
  const size_t r = p.regions.size();
  std::vector<std::set<size_t>> edges(r);
  std::vector<int64_t> producer(g.values.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (ValueId out : g.nodes[n].outputs) producer[static_cast<size_t>(out)] = static_cast<int64_t>(n);
  }
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (ValueId in : g.nodes[n].inputs) {
      if (in == kNoValue || producer[static_cast<size_t>(in)] < 0) continue;
      const size_t from = p.region_of_node[static_cast<size_t>(producer[static_cast<size_t>(in)])];
      const size_t to = p.region_of_node[n];
      if (from != to) edges[from].insert(to);
    }
  }
  std::vector<int> state(r, 0);  // 0 new, 1 on stack, 2 done
  std::function<bool(size_t)> visit = [&](size_t u) {
    state[u] = 1;
    for (size_t v : edges[u]) {
      if (state[v] == 1 || (state[v] == 0 && visit(v))) return true;
    }
    state[u] = 2;
    return false;
  };
  for (size_t u = 0; u < r; ++u) {
    if (state[u] == 0 && visit(u)) return true;
  }
  return false;
}

TEST(Partitioner, MatchCompositesFusesWithinTheNodesGivenOnlyWhereInputsAreReady) {
  // x -> Exp (0) -> Relu (1) -> Neg (2) -> Add(Relu, Neg) (3) -> Relu (4) -> y
  GraphBuilder b;
  const ValueId x = b.input("x");
  const ValueId e = b.node("Exp", {x});
  const ValueId r = b.node("Relu", {e});
  const ValueId n = b.node("Neg", {r});
  const ValueId a = b.node("Add", {r, n});
  b.output(b.node("Relu", {a}));
  Graph g = b.graph;
  Declarations d;
  d.pattern("ExpRelu", op("Relu", {op("Exp")}));
  d.pattern("AddRelu", op("Relu", {op("Add", {any(), any()})}));
  auto patterns = [](const std::vector<Composite>& list) {
    std::vector<std::pair<std::string, std::vector<size_t>>> out;
    for (const Composite& c : list) out.emplace_back(c.pattern, c.nodes);
    return out;
  };
  using Found = std::vector<std::pair<std::string, std::vector<size_t>>>;
  const GraphUses uses(g);
  EXPECT_EQ(patterns(match_composites(g, uses, {0, 1, 2, 3, 4}, d)),
            (Found{{"ExpRelu", {0, 1}}, {"AddRelu", {3, 4}}}));
  // Only among the nodes given: Exp outside, so no ExpRelu.
  EXPECT_EQ(patterns(match_composites(g, uses, {1, 2, 3, 4}, d)), (Found{{"AddRelu", {3, 4}}}));
  // An execution order in which the Add (first member of AddRelu) would run before Neg, which it reads:
  // the composite, emitted at its first member, would read Neg's output before it is made.
  EXPECT_EQ(patterns(match_composites(g, uses, {0, 1, 3, 2, 4}, d)), (Found{{"ExpRelu", {0, 1}}}));
}

TEST(Partitioner, PriorityOrderDecidesAndAdjacentNodesMerge) {
  Graph g = chain();
  Declarations a = claims({"Relu", "Exp", "Add"});
  Declarations native = claims_everything();
  PartitionPolicy policy;
  policy.fallback = 1;
  PartitionResult p = partition_graph(g, {{"a", &a}, {"native", &native}}, policy);
  check_partition(g, p);
  ASSERT_EQ(p.regions.size(), 2u);
  EXPECT_EQ(p.backends[p.regions[0].backend], "a");
  EXPECT_EQ(p.regions[0].nodes, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(backend_of(p, 4), "native");
  EXPECT_EQ(p.decisions[4].refusals[0], "Softmax is not declared");
  EXPECT_EQ(p.regions[0].inputs, (std::vector<ValueId>{g.inputs[0]}));
  EXPECT_EQ(p.regions[1].outputs, g.outputs);
  // The other priority order puts everything on native.
  policy.fallback = 0;
  PartitionResult q = partition_graph(g, {{"native", &native}, {"a", &a}}, policy);
  EXPECT_EQ(q.regions.size(), 1u);
}

TEST(Partitioner, DenyAndPlaceByOpAndByNodeName) {
  Graph g = chain();
  Declarations a = claims({"Relu", "Exp", "Add"});
  Declarations native = claims_everything();
  std::vector<PartitionBackend> backends = {{"a", &a}, {"native", &native}};
  PartitionPolicy policy;
  policy.fallback = 1;
  policy.deny = {{"a", "Exp"}};
  PartitionResult p = partition_graph(g, backends, policy);
  EXPECT_EQ(backend_of(p, 1), "native");
  EXPECT_EQ(p.decisions[1].refusals[0], "denied by --deny a:Exp");
  policy.deny = {{"a", "Relu_3"}};  // a node name
  p = partition_graph(g, backends, policy);
  EXPECT_EQ(backend_of(p, 0), "a");
  EXPECT_EQ(backend_of(p, 3), "native");
  policy.deny.clear();
  // A node name beats an op type, in either order; two names that disagree are an error.
  policy.place = {{"Relu_0", "a"}, {"op:Relu", "native"}};
  p = partition_graph(g, backends, policy);
  EXPECT_EQ(backend_of(p, 0), "a");
  EXPECT_EQ(backend_of(p, 3), "native");
  policy.place = {{"Relu_0", "a"}, {"Relu_0", "native"}};
  EXPECT_USER_ERROR(partition_graph(g, backends, policy), "disagree about node 'Relu_0'");
  policy.place = {{"op:Relu", "native"}, {"Exp_1", "native"}};
  p = partition_graph(g, backends, policy);
  EXPECT_EQ(backend_of(p, 0), "native");
  EXPECT_EQ(backend_of(p, 1), "native");
  EXPECT_EQ(backend_of(p, 2), "a");
  EXPECT_EQ(p.decisions[1].why, "placed by --place Exp_1=native");
  check_partition(g, p);
  EXPECT_FALSE(region_graph_has_cycle(g, p));
}

TEST(Partitioner, BadPoliciesAreUserErrorsNamingTheProblem) {
  Graph g = chain();
  Declarations a = claims({"Relu", "Exp", "Add"});
  Declarations native = claims_everything();
  std::vector<PartitionBackend> backends = {{"a", &a}, {"native", &native}};
  auto partition = [&](PartitionPolicy policy) {
    policy.fallback = 1;
    partition_graph(g, backends, policy);
  };
  PartitionPolicy place_refused;
  place_refused.place = {{"Softmax_4", "a"}};
  EXPECT_USER_ERROR(partition(place_refused), "backend 'a' cannot run node 'Softmax_4' (Softmax): Softmax is not declared");
  PartitionPolicy unknown_backend;
  unknown_backend.deny = {{"dnnl", "Relu"}};
  EXPECT_USER_ERROR(partition(unknown_backend), "backend 'dnnl' is not among the backends in use (a, native)");
  PartitionPolicy unknown_node;
  unknown_node.place = {{"node:conv_3", "native"}};
  EXPECT_USER_ERROR(partition(unknown_node), "the model has no node named 'conv_3'");
  PartitionPolicy nonsense;
  nonsense.place = {{"NoSuchThing", "native"}};
  EXPECT_USER_ERROR(partition(nonsense), "'NoSuchThing' names no node of the model and no op type");
}

TEST(Partitioner, StrictModeNamesEveryUnsupportedNode) {
  Graph g = chain();
  Declarations a = claims({"Relu", "Add"});
  PartitionPolicy policy;
  policy.strict = true;
  for (const char* part : {"strict placement: 2 node(s)", "node 'Exp_1' (Exp): a: Exp is not declared", "node 'Softmax_4' (Softmax)"}) {
    EXPECT_USER_ERROR(partition_graph(g, {{"a", &a}}, policy), part);
  }
  // Everything claimed: strict is fine, and one backend takes the whole graph.
  Declarations all = claims({"Relu", "Exp", "Add", "Softmax"});
  PartitionResult p = partition_graph(g, {{"a", &all}}, policy);
  EXPECT_EQ(p.regions.size(), 1u);
}

TEST(Partitioner, SmallRegionsFallBackUnlessPlaced) {
  // Relu on a, Exp on native, Add + Relu on a, Softmax on native: regions of 1 and 2 nodes on a.
  Graph g = chain();
  Declarations a = claims({"Relu", "Add"});
  Declarations native = claims_everything();
  std::vector<PartitionBackend> backends = {{"a", &a}, {"native", &native}};
  PartitionPolicy policy;
  policy.fallback = 1;
  policy.min_region_size = 2;
  PartitionResult p = partition_graph(g, backends, policy);
  EXPECT_EQ(backend_of(p, 0), "native");
  EXPECT_NE(p.decisions[0].why.find("too small (1 < 2 nodes)"), std::string::npos) << p.decisions[0].why;
  EXPECT_EQ(backend_of(p, 2), "a");
  EXPECT_EQ(backend_of(p, 3), "a");
  policy.place = {{"Relu_0", "a"}};
  p = partition_graph(g, backends, policy);
  EXPECT_EQ(backend_of(p, 0), "a");
  policy.place.clear();
  policy.min_region_size = 3;
  p = partition_graph(g, backends, policy);
  EXPECT_EQ(p.regions.size(), 1u);
  EXPECT_EQ(p.backends[p.regions[0].backend], "native");
}

TEST(Partitioner, PatternsBecomeCompositesOnTheirBackend) {
  Graph g = chain();
  Declarations a = claims({"Relu"});
  a.pattern("AddRelu", op("Relu", {op("Add", {any(), any()})}));
  Declarations native = claims_everything();
  PartitionPolicy policy;
  policy.fallback = 1;
  PartitionResult p = partition_graph(g, {{"a", &a}, {"native", &native}}, policy);
  check_partition(g, p);
  EXPECT_EQ(backend_of(p, 2), "a");  // Add, which a only takes inside the pattern
  EXPECT_EQ(backend_of(p, 3), "a");
  size_t composites = 0;
  for (const Region& r : p.regions) {
    for (const Composite& c : r.composites) {
      EXPECT_EQ(c.pattern, "AddRelu");
      EXPECT_EQ(c.nodes, (std::vector<size_t>{2, 3}));
      ++composites;
    }
  }
  EXPECT_EQ(composites, 1u);
  EXPECT_NE(p.decisions[2].why.find("pattern AddRelu"), std::string::npos);
  // Denying one member keeps the pattern from matching.
  policy.deny = {{"a", "Add"}};
  p = partition_graph(g, {{"a", &a}, {"native", &native}}, policy);
  EXPECT_EQ(backend_of(p, 2), "native");
  for (const Region& r : p.regions) EXPECT_TRUE(r.composites.empty());
}

TEST(Partitioner, ExtractionGivesStandaloneRegionGraphs) {
  GraphBuilder b;
  ValueId x = b.input("x");
  ValueId w = b.constant("w", {2, 3});
  ValueId a = b.node("Add", {x, w});
  ValueId r = b.node("Relu", {a});
  ValueId e = b.node("Exp", {r});
  ValueId m = b.node("Mul", {e, w});  // the constant is read by two regions
  b.output(m);
  b.output(r);
  Graph& g = b.graph;
  Declarations d = claims({"Exp"});
  d.pattern("AddRelu", op("Relu", {op("Add", {any(), any()})}));
  Declarations native = claims_everything();
  PartitionPolicy policy;
  policy.fallback = 1;
  PartitionResult p = partition_graph(g, {{"d", &d}, {"native", &native}}, policy);
  ASSERT_EQ(p.regions.size(), 2u);
  RegionGraph first = extract_region(g, p.regions[0]);
  EXPECT_EQ(first.graph.inputs.size(), 1u);
  ASSERT_EQ(first.graph.nodes.size(), 2u);  // the composite and Exp
  const Node& composite = first.graph.nodes[0];
  EXPECT_EQ(composite.op_type, "Composite");
  EXPECT_EQ(composite.domain, "tessera");
  EXPECT_EQ(composite.attrs.find("pattern")->s, "AddRelu");
  const Graph& body = *composite.attrs.find("body")->graph;
  EXPECT_EQ(body.nodes.size(), 2u);
  EXPECT_EQ(body.inputs.size(), composite.inputs.size());
  EXPECT_EQ(composite.inputs.size(), 2u);  // x and the constant w
  EXPECT_TRUE(first.graph.is_constant(composite.inputs[1]));
  EXPECT_EQ(first.graph.value(composite.inputs[1]).constant.get(), g.value(w).constant.get());  // shared, not copied
  // Outputs: r (graph output) and e (read by the next region).
  EXPECT_EQ(first.graph.outputs.size(), 2u);
  RegionGraph second = extract_region(g, p.regions[1]);
  EXPECT_EQ(second.graph.inputs.size(), 1u);  // e only: the constant w is the region's own
  EXPECT_TRUE(second.graph.is_constant(second.graph.nodes[0].inputs[1]));
  EXPECT_EQ(second.global_value[static_cast<size_t>(second.graph.outputs[0])], m);
}

TEST(Partitioner, CheckPartitionRejectsCyclesAndGaps) {
  Graph g = chain();
  Declarations all = claims_everything();
  PartitionResult p = partition_graph(g, {{"a", &all}, {"b", &all}}, PartitionPolicy{});
  // Hand-made: region 0 = {0, 2}, region 1 = {1}: 0 → 1 → 0 is a cycle.
  PartitionResult bad = p;
  // A partition can come from an artifact: a bad one is the user's (the file's) error.
  bad.regions = {Region{0, {0, 2}, {}, {}, {}}, Region{1, {1}, {}, {}, {}}, Region{0, {3, 4}, {}, {}, {}}};
  EXPECT_USER_ERROR(check_partition(g, bad), "before it is computed");
  bad.regions = {Region{0, {0, 1, 2}, {}, {}, {}}};  // nodes 3 and 4 in no region
  EXPECT_USER_ERROR(check_partition(g, bad), "is in no region");
  bad.regions = {Region{0, {0, 1, 2, 3, 4}, {}, {}, {}}, Region{1, {4}, {}, {}, {}}};
  EXPECT_USER_ERROR(check_partition(g, bad), "is in regions 0 and 1");
}

/// A random DAG of elementwise nodes reading one or two earlier values.
Graph random_dag(std::mt19937& rng, size_t nodes) {
  static const char* const kUnary[] = {"Relu", "Exp", "Neg", "Sigmoid"};
  static const char* const kBinary[] = {"Add", "Mul", "Sub"};
  GraphBuilder b;
  std::vector<ValueId> values = {b.input("x"), b.input("y")};
  for (size_t i = 0; i < nodes; ++i) {
    // Prefer recent values, so the graphs have long chains and some wide joins.
    auto pick = [&] {
      std::uniform_int_distribution<size_t> recent(values.size() > 4 ? values.size() - 4 : 0, values.size() - 1);
      std::uniform_int_distribution<size_t> all(0, values.size() - 1);
      return values[rng() % 3 ? recent(rng) : all(rng)];
    };
    if (rng() % 2) values.push_back(b.node(kUnary[rng() % 4], {pick()}));
    else values.push_back(b.node(kBinary[rng() % 3], {pick(), pick()}));
  }
  b.output(values.back());
  if (values.size() > 3) b.output(values[values.size() / 2]);
  return b.graph;
}

TEST(Partitioner, PropertyNoPartitionOfARandomGraphHasACycle) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 400; ++trial) {
    Graph g = random_dag(rng, 1 + rng() % 60);
    // Three backends, each claiming a random subset of nodes (by node, so
    // support sets are arbitrary), plus the fallback that takes everything.
    std::vector<std::vector<char>> claimed(3, std::vector<char>(g.nodes.size()));
    for (auto& set : claimed) {
      const unsigned density = 1 + rng() % 4;
      for (char& c : set) c = rng() % 5 < density;
    }
    std::vector<Declarations> decls(3);
    for (size_t k = 0; k < 3; ++k) {
      decls[k].any_op([&g, &claimed, k](const Graph&, const Node& node) -> SupportDecision {
        const size_t index = static_cast<size_t>(&node - g.nodes.data());
        return {claimed[k][index] != 0, "not in the random set"};
      });
      if (rng() % 2) decls[k].pattern("ExpRelu", op("Relu", {op("Exp")}));
      if (rng() % 2) decls[k].pattern("MulAdd", op("Add", {op("Mul"), any()}));
    }
    Declarations native = claims_everything();
    std::vector<PartitionBackend> backends = {{"a", &decls[0]}, {"b", &decls[1]}, {"c", &decls[2]}, {"native", &native}};
    PartitionPolicy policy;
    policy.fallback = 3;
    policy.min_region_size = 1 + static_cast<int>(rng() % 3);
    PartitionResult p = partition_graph(g, backends, policy);
    ASSERT_NO_THROW(check_partition(g, p)) << "trial " << trial;
    ASSERT_FALSE(region_graph_has_cycle(g, p)) << "trial " << trial;
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const size_t backend = p.regions[p.region_of_node[n]].backend;
      if (backend < 3 && p.decisions[n].why.rfind("pattern", 0) != 0) {
        ASSERT_TRUE(claimed[backend][n]) << "trial " << trial << ": node " << n << " went to a backend that refused it";
      }
    }
    for (size_t r = 0; r < p.regions.size(); ++r) {
      if (p.regions[r].backend != 3) {
        ASSERT_GE(static_cast<int>(p.regions[r].nodes.size()), policy.min_region_size) << "trial " << trial;
      }
    }
    // Extraction and reordering keep the graph runnable in region order.
    Graph reordered = g;
    order_nodes_by_region(reordered, p);
    ASSERT_NO_THROW(check_partition(reordered, p));
    for (const Region& region : p.regions) ASSERT_NO_THROW(extract_region(reordered, region));
  }
}

}  // namespace
}  // namespace tessera
