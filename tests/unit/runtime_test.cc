// Runtime: compile pipeline, memory plan, input validation, concurrent runs.
#include <thread>

#include "ir/error.h"
#include "runtime/memory_plan.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

TEST(Runtime, AddBroadcasts) {
  OneOpGraph spec{.op_type = "Add"};
  spec.inputs = {make_float({2, 3}, {1, 2, 3, 4, 5, 6}), make_float({3}, {10, 20, 30})};
  auto out = run_one_op(spec);
  expect_close(out[0], make_float({2, 3}, {11, 22, 33, 14, 25, 36}));
}

TEST(Runtime, WrongInputShapeIsAUserError) {
  Graph graph;
  ValueId x = graph.add_value("x", TensorType::make(DType::kFloat32, {2, 2}));
  ValueId y = graph.add_value("y");
  graph.inputs = {x};
  graph.outputs = {y};
  graph.nodes.push_back(Node{.name = "relu", .op_type = "Relu", .opset = 14, .inputs = {x}, .outputs = {y}});
  auto model = CompiledModel::compile(graph, {});
  Tensor bad(DType::kFloat32, {3, 2});
  EXPECT_USER_ERROR(model->run({bad.view()}), "input 'x'");
  Tensor wrong_dtype(DType::kInt64, {2, 2});
  EXPECT_USER_ERROR(model->run({wrong_dtype.view()}), "input 'x'");
}

TEST(Runtime, MemoryPlanReusesBuffers) {
  // x -> r1 -> r2 -> r3 -> y: r1's buffer can be reused by r3.
  Graph graph;
  ValueId x = graph.add_value("x", TensorType::make(DType::kFloat32, {256}));
  graph.inputs = {x};
  ValueId prev = x;
  for (int i = 0; i < 4; ++i) {
    ValueId next = graph.add_value("v" + std::to_string(i));
    graph.nodes.push_back(Node{.name = "relu" + std::to_string(i), .op_type = "Relu", .opset = 14, .inputs = {prev}, .outputs = {next}});
    prev = next;
  }
  graph.outputs = {prev};
  auto model = CompiledModel::compile(graph, {});
  const MemoryPlan& plan = model->memory_plan();
  EXPECT_EQ(plan.unplanned_bytes, 3 * 1024);
  EXPECT_EQ(plan.arena_bytes, 2 * 1024);
  Tensor in = random_float({256}, 1);
  auto out = model->run({in.view()});
  for (int64_t i = 0; i < 256; ++i) EXPECT_EQ(out[0].as<float>()[i], std::max(0.0f, in.as<float>()[i]));
}

TEST(Runtime, ConcurrentRunsGiveSameResults) {
  OneOpGraph spec{.op_type = "Add"};
  Graph graph;
  ValueId a = graph.add_value("a", TensorType::make(DType::kFloat32, {64, 64}));
  ValueId b = graph.add_value("b", TensorType::make(DType::kFloat32, {64, 64}));
  ValueId s = graph.add_value("s");
  ValueId y = graph.add_value("y");
  graph.inputs = {a, b};
  graph.outputs = {y};
  graph.nodes.push_back(Node{.name = "add", .op_type = "Add", .opset = 14, .inputs = {a, b}, .outputs = {s}});
  graph.nodes.push_back(Node{.name = "relu", .op_type = "Relu", .opset = 14, .inputs = {s}, .outputs = {y}});
  CompileOptions options;
  options.num_threads = 2;
  auto model = CompiledModel::compile(graph, options);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      Tensor x = random_float({64, 64}, static_cast<uint32_t>(t));
      Tensor z = random_float({64, 64}, static_cast<uint32_t>(t + 100));
      bool good = true;
      for (int rep = 0; rep < 50; ++rep) {
        auto out = model->run({x.view(), z.view()});
        for (int64_t i = 0; i < x.numel(); ++i) {
          good &= out[0].as<float>()[i] == std::max(0.0f, x.as<float>()[i] + z.as<float>()[i]);
        }
      }
      ok[static_cast<size_t>(t)] = good;
    });
  }
  for (auto& th : threads) th.join();
  for (int v : ok) EXPECT_TRUE(v);
}

}  // namespace
}  // namespace tessera::testing
