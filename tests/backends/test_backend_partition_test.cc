// The test backend on regions made by the real partitioner: its declarations
// drive partition_graph, extract_region builds the region graph (composites
// included), and the compiled region must give the native results. This is
// what keeps the backend's reading of composite bodies in step with
// extract_region's.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/test_backend_helpers.h"
#include "backends/testing/test_backend.h"
#include "partition/declarations.h"
#include "partition/partitioner.h"

namespace tessera::testing {
namespace {

/// x → MatMul(w) → Add(bias) → Gelu (erf form) → Softmax; also returns the Add's output.
Graph matmul_bias_gelu_softmax(ValueId* biased_out = nullptr) {
  GraphBuilder b;
  const Shape shape = {2, 3, 5};
  const ValueId x = b.input("x", {2, 3, 4});
  const ValueId w = b.constant("w", random_tensor({4, 5}, 80));
  const ValueId bias = b.constant("bias", random_tensor({5}, 81));
  const ValueId sqrt2 = b.constant("sqrt2", float_tensor({}, {1.4142135f}));
  const ValueId one = b.constant("one", float_tensor({}, {1.0f}));
  const ValueId half = b.constant("half", float_tensor({}, {0.5f}));
  const ValueId product = b.node("MatMul", {x, w}, shape);
  const ValueId biased = b.node("Add", {bias, product}, shape);
  const ValueId divided = b.node("Div", {biased, sqrt2}, shape);
  const ValueId erf = b.node("Erf", {divided}, shape);
  const ValueId plus_one = b.node("Add", {erf, one}, shape);
  const ValueId times_x = b.node("Mul", {biased, plus_one}, shape);
  const ValueId gelu = b.node("Mul", {times_x, half}, shape);
  b.output(b.node("Softmax", {gelu}, shape));
  if (biased_out) *biased_out = biased;
  return b.graph();
}

/// Partitions `graph` onto the test backend alone, compiles and runs its one
/// region, compares with the native reference; returns the composites' patterns.
std::vector<std::string> partition_run_and_compare(const Graph& graph) {
  std::unique_ptr<Backend> backend = make_test_backend();
  PartitionResult partition = partition_graph(graph, {{"test", &backend->declarations()}}, PartitionPolicy{});
  EXPECT_EQ(partition.regions.size(), 1u);
  if (partition.regions.size() != 1) return {};
  RegionGraph region = extract_region(graph, partition.regions[0]);
  const TestDeviceStats before = test_device_stats();
  {
    CompiledRegion compiled = backend->compile(region.graph, RegionOptions{});
    const std::vector<Tensor> inputs = {random_tensor({2, 3, 4}, 82, -2, 2)};
    std::vector<Tensor> actual = run_on_device(*compiled.executable, region.graph, *backend->memory_space(), inputs);
    std::vector<Tensor> expected = evaluate_reference(graph, inputs);
    EXPECT_EQ(actual.size(), expected.size());
    // The region lists its outputs in its own order: match them up through the global ids.
    for (size_t i = 0; i < actual.size(); ++i) {
      const ValueId global = region.global_value[static_cast<size_t>(region.graph.outputs[i])];
      const auto position = std::find(graph.outputs.begin(), graph.outputs.end(), global);
      EXPECT_NE(position, graph.outputs.end());
      if (position == graph.outputs.end()) continue;
      expect_near_tensor(actual[i], expected[static_cast<size_t>(position - graph.outputs.begin())]);
    }
  }
  EXPECT_EQ(test_device_stats().live_allocations, before.live_allocations);
  std::vector<std::string> patterns;
  for (const Composite& composite : partition.regions[0].composites) patterns.push_back(composite.pattern);
  return patterns;
}

TEST(TestBackendPartition, LargestPatternIsTakenAndRunsLikeNative) {
  EXPECT_EQ(partition_run_and_compare(matmul_bias_gelu_softmax()), std::vector<std::string>{"MatMulBiasGelu"});
}

TEST(TestBackendPartition, EscapingIntermediateSplitsIntoSmallerPatterns) {
  // The MatMul+Add result is also a graph output, so it cannot sit inside a
  // larger composite: MatMulBias ends there and Gelu starts from it.
  ValueId biased = kNoValue;
  Graph graph = matmul_bias_gelu_softmax(&biased);
  graph.outputs.push_back(biased);
  std::vector<std::string> patterns = partition_run_and_compare(graph);
  std::sort(patterns.begin(), patterns.end());
  EXPECT_EQ(patterns, (std::vector<std::string>{"Gelu", "MatMulBias"}));
}

}  // namespace
}  // namespace tessera::testing
