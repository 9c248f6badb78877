// Tests of the compile's rounds (CompiledModel::compile): when a backend refuses
// a node while compiling its region, the model is partitioned and compiled
// again, and a region that comes back unchanged is taken from the round before
// rather than compiled again (region_key.h); the fallback backend's regions are
// compiled only in a round whose other regions refused nothing new. The key
// must tell apart everything a backend compiles from, and a reused region must
// run as a fresh one would.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "graph_builder.h"
#include "runtime/region_key.h"
#include "runtime/session.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

/// x[2, 8] -> MatMul(W[8, 6]) -> LeakyRelu(alpha) -> y.
GraphBuilder small_graph(float alpha = 0.1f, Shape x_shape = {2, 8}) {
  GraphBuilder b;
  const ValueId x = b.input("x", std::move(x_shape));
  const ValueId m = b.node("MatMul", {x, b.constant(random_float({8, 6}, 1))});
  b.output(b.node("LeakyRelu", {m}, attributes({{"alpha", Attribute::of_float(alpha)}})));
  return b;
}

TEST(RegionKey, SpellsOutWhatABackendCompilesFrom) {
  RegionOptions options;
  options.num_threads = 2;
  const GraphBuilder base = small_graph();
  const std::string key = region_compile_key("dnnl", base.graph, options);
  // A copy (the same constants, shared) is the same region.
  const Graph copy = base.graph;
  EXPECT_EQ(region_compile_key("dnnl", copy, options), key);

  std::vector<std::pair<std::string, std::string>> others;
  others.emplace_back("another backend", region_compile_key("native", base.graph, options));
  others.emplace_back("an attribute", region_compile_key("dnnl", small_graph(0.2f).graph, options));
  others.emplace_back("an input's dims", region_compile_key("dnnl", small_graph(0.1f, {3, 8}).graph, options));
  // Same names, a constant of the same shape and other values (another tensor).
  others.emplace_back("a constant's data", region_compile_key("dnnl", small_graph().graph, options));
  Graph rewired = base.graph;
  rewired.nodes[1].inputs[0] = rewired.inputs[0];  // LeakyRelu reads x (its dims differ, so only the wiring tells)
  others.emplace_back("a node's input", region_compile_key("dnnl", rewired, options));
  Graph renamed = base.graph;
  renamed.nodes[0].name = "MatMul_other";
  others.emplace_back("a node's name", region_compile_key("dnnl", renamed, options));
  Graph fused = base.graph;
  fused.nodes[0].fused.push_back({"Add_9", "Add"});
  others.emplace_back("a fused member", region_compile_key("dnnl", fused, options));
  Graph with_body = base.graph;
  auto body = std::make_shared<Graph>(small_graph().graph);
  Attribute body_attr;
  body_attr.kind = Attribute::Kind::kGraph;
  body_attr.graph = body;
  with_body.nodes[1].attrs.set("body", body_attr);
  const std::string with_body_key = region_compile_key("dnnl", with_body, options);
  others.emplace_back("a subgraph attribute", with_body_key);
  Graph other_body = with_body;
  auto changed = std::make_shared<Graph>(*body);
  changed->nodes[1].attrs.set("alpha", Attribute::of_float(0.3f));
  body_attr.graph = changed;
  other_body.nodes[1].attrs.set("body", body_attr);
  EXPECT_NE(region_compile_key("dnnl", other_body, options), with_body_key) << "a subgraph's attribute";
  RegionOptions threads = options;
  threads.num_threads = 1;
  others.emplace_back("the thread count", region_compile_key("dnnl", base.graph, threads));
  RegionOptions bf16 = options;
  bf16.bf16_nodes = {1, 0};
  others.emplace_back("bf16 nodes", region_compile_key("dnnl", base.graph, bf16));
  RegionOptions probe = options;
  probe.probe_input_dims = {{256, 8}};
  others.emplace_back("probe dims", region_compile_key("dnnl", base.graph, probe));
  for (const auto& [what, other] : others) EXPECT_NE(other, key) << what;
}

TEST(CompileRounds, AnUnchangedRegionIsTakenFromTheRoundBeforeAndRunsTheSame) {
  // x[1, 64] -> MatMul(W1) -> Relu -> Tanh (placed on native) -> MatMul(W2[64, 32768]) -> y. oneDNN
  // claims both matmuls; compiling the second (one row against 2^21 weights) it refuses it (its kernels
  // stream such weights at half native's rate, or it has only its reference kernel), which starts a
  // second round: the first matmul's region is the same there and must not be compiled again.
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 64});
  const ValueId h = b.node("Relu", {b.node("MatMul", {x, b.constant(random_float({64, 64}, 2))})});
  const ValueId t = b.node("Tanh", {h});
  const std::string tanh_name = b.graph.nodes.back().name;
  b.output(b.node("MatMul", {t, b.constant(random_float({64, 32768}, 3))}));
  const std::string second = b.graph.nodes.back().name;
  CompileOptions options;
  options.backends = {"dnnl", "native"};
  options.place = {{tanh_name, "native"}};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
  bool refused = false;
  for (const NodePlacement& p : model->placement()) {
    if (p.node_name != second) continue;
    EXPECT_EQ(p.backend, "native") << p.why;
    refused = p.why.find("refused it when compiling it") != std::string::npos;
    EXPECT_TRUE(refused) << p.why;
  }
  const CompiledModel::CompileRounds& rounds = model->compile_rounds();
  EXPECT_EQ(rounds.rounds, 2);
  // Round 1: {MatMul, Relu} and {MatMul} on dnnl compiled; {Tanh} on native not, since the dnnl
  // regions brought a refusal (the fallback's regions wait for a round without one). Round 2: the
  // first the same (taken), {Tanh, MatMul} on native (compiled).
  EXPECT_EQ(rounds.regions_reused, 1);
  EXPECT_EQ(rounds.regions_compiled, 3);
  ASSERT_EQ(model->backend_names().size(), 2u);

  // The reused region runs under the new round's numbering as a fresh compile would: against float64.
  const Tensor input = random_float({1, 64}, 4);
  const std::vector<Tensor> out = model->run({input.view()});
  ASSERT_EQ(out.size(), 1u);
  const Tensor& w1 = *b.graph.values[static_cast<size_t>(b.graph.nodes[0].inputs[1])].constant;
  const Tensor& w2 = *b.graph.values[static_cast<size_t>(b.graph.nodes[3].inputs[1])].constant;
  std::vector<double> hidden(64);
  for (int64_t j = 0; j < 64; ++j) {
    double sum = 0;
    for (int64_t k = 0; k < 64; ++k) sum += double(input.as<float>()[k]) * w1.as<float>()[k * 64 + j];
    hidden[static_cast<size_t>(j)] = std::tanh(std::max(sum, 0.0));
  }
  int failures = 0;
  for (int64_t j = 0; j < 32768 && failures < 5; ++j) {
    double sum = 0;
    for (int64_t k = 0; k < 64; ++k) sum += hidden[static_cast<size_t>(k)] * w2.as<float>()[k * 32768 + j];
    const double got = out[0].as<float>()[j];
    if (!(std::fabs(got - sum) <= 1e-4 + 1e-4 * std::fabs(sum))) {
      ADD_FAILURE() << "y[" << j << "] = " << got << ", float64 " << sum;
      ++failures;
    }
  }
}

}  // namespace
}  // namespace tessera::testing
