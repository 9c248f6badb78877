// How long partitioning takes on large graphs (the issue asks for 10,000+
// nodes in well under a second). Google Benchmark; run with
//   build/bench/tessera_partition_bench
// Graphs: a transformer-like stack of MatMul/Add/Relu/Softmax blocks with
// float32 static shapes, partitioned among the real test and native
// backends' declarations (predicates and patterns); and random DAGs with
// random support sets among four backends.
#include <benchmark/benchmark.h>

#include <random>

#include "backends/native/native_backend.h"
#include "backends/testing/test_backend.h"
#include "partition/declarations.h"
#include "partition/partitioner.h"

namespace tessera {
namespace {

ValueId add_node(Graph& g, const std::string& op_type, std::vector<ValueId> inputs, Shape shape) {
  const std::string name = op_type + "_" + std::to_string(g.nodes.size());
  ValueId out = g.add_value(name + "_out", TensorType::make(DType::kFloat32, std::move(shape)));
  Node n;
  n.name = name;
  n.op_type = op_type;
  n.opset = 17;
  n.inputs = std::move(inputs);
  n.outputs = {out};
  g.nodes.push_back(std::move(n));
  return out;
}

/// Blocks of MatMul → Add(bias) → Relu → Add(residual) → Erf (native only) →
/// Mul → Softmax → Exp (8 nodes), repeated to `nodes` nodes.
Graph block_graph(size_t nodes) {
  Graph g;
  const Shape shape = {4, 16};
  ValueId x = g.add_value("x", TensorType::make(DType::kFloat32, shape));
  g.inputs = {x};
  ValueId w = g.add_constant("w", Tensor(DType::kFloat32, {16, 16}));
  ValueId b = g.add_constant("b", Tensor(DType::kFloat32, {16}));
  while (g.nodes.size() + 8 <= nodes) {
    ValueId m = add_node(g, "MatMul", {x, w}, shape);
    ValueId a = add_node(g, "Add", {m, b}, shape);
    ValueId r = add_node(g, "Relu", {a}, shape);
    ValueId res = add_node(g, "Add", {r, x}, shape);
    ValueId s = add_node(g, "Erf", {res}, shape);
    ValueId mul = add_node(g, "Mul", {s, res}, shape);
    ValueId soft = add_node(g, "Softmax", {mul}, shape);
    g.nodes.back().attrs.set("axis", Attribute::of_int(-1));
    x = add_node(g, "Exp", {soft}, shape);
  }
  g.outputs = {x};
  return g;
}

void BM_PartitionBlocks(benchmark::State& state) {
  Graph g = block_graph(static_cast<size_t>(state.range(0)));
  auto test = make_test_backend();
  auto native = make_native_backend();
  std::vector<PartitionBackend> backends = {{"test", &test->declarations()}, {"native", &native->declarations()}};
  PartitionPolicy policy;
  policy.fallback = 1;
  policy.min_region_size = 2;
  size_t regions = 0;
  for (auto _ : state) {
    PartitionResult p = partition_graph(g, backends, policy);
    regions = p.regions.size();
    benchmark::DoNotOptimize(p);
  }
  state.counters["nodes"] = static_cast<double>(g.nodes.size());
  state.counters["regions"] = static_cast<double>(regions);
}
BENCHMARK(BM_PartitionBlocks)->Arg(1000)->Arg(10000)->Arg(50000)->Unit(benchmark::kMillisecond);

void BM_PartitionRandomDag(benchmark::State& state) {
  std::mt19937 rng(7);
  Graph g;
  const Shape shape = {8};
  std::vector<ValueId> values = {g.add_value("x", TensorType::make(DType::kFloat32, shape))};
  g.inputs = values;
  const char* const kOps[] = {"Relu", "Exp", "Add", "Mul"};
  for (int64_t i = 0; i < state.range(0); ++i) {
    auto pick = [&] {
      const size_t lo = values.size() > 8 ? values.size() - 8 : 0;
      return values[lo + rng() % (values.size() - lo)];
    };
    const char* op_type = kOps[rng() % 4];
    const bool binary = op_type[0] == 'A' || op_type[0] == 'M';
    values.push_back(add_node(g, op_type, binary ? std::vector<ValueId>{pick(), pick()} : std::vector<ValueId>{pick()}, shape));
  }
  g.outputs = {values.back()};
  std::vector<std::vector<char>> claimed(3, std::vector<char>(g.nodes.size()));
  for (auto& set : claimed) {
    for (char& c : set) c = rng() % 3 != 0;
  }
  std::vector<Declarations> decls(3);
  for (size_t k = 0; k < 3; ++k) {
    decls[k].any_op([&g, &claimed, k](const Graph&, const Node& node) -> SupportDecision {
      return {claimed[k][static_cast<size_t>(&node - g.nodes.data())] != 0, "not in the random set"};
    });
    decls[k].pattern("ExpRelu", op("Relu", {op("Exp")}));
  }
  Declarations native;
  native.any_op([](const Graph&, const Node&) { return SupportDecision{true, ""}; });
  std::vector<PartitionBackend> backends = {{"a", &decls[0]}, {"b", &decls[1]}, {"c", &decls[2]}, {"native", &native}};
  PartitionPolicy policy;
  policy.fallback = 3;
  size_t regions = 0;
  for (auto _ : state) {
    PartitionResult p = partition_graph(g, backends, policy);
    regions = p.regions.size();
    benchmark::DoNotOptimize(p);
  }
  state.counters["nodes"] = static_cast<double>(g.nodes.size());
  state.counters["regions"] = static_cast<double>(regions);
}
BENCHMARK(BM_PartitionRandomDag)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
