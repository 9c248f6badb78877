// oneDNN primitives shared between equal descriptors (dnnl_primitive_share.cc): a model's repeated
// layers and a second session of it create each primitive once, and descriptors that differ in
// anything that changes the result (a fused clamp's bounds, the layer's width, the thread count) do
// not share. Every model is checked against products computed in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/dnnl/dnnl_internal.h"
#include "graph_builder.h"
#include "runtime/session.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

/// x[rows, width] -> `layers` x (MatMul with its own weights -> Add its bias -> Clip(0, high)), which
/// oneDNN runs as one matmul with the clamp as a post-op.
struct ClampedLayers {
  std::vector<Tensor> weights, biases;
  float high;
  Graph graph;

  ClampedLayers(int layers, int64_t rows, int64_t width, float high_bound, uint32_t seed) : high(high_bound) {
    GraphBuilder b;
    ValueId v = b.input("x", {rows, width});
    for (int i = 0; i < layers; ++i) {
      weights.push_back(random_uniform({width, width}, seed + static_cast<uint32_t>(i), -0.5f, 0.5f));
      biases.push_back(random_uniform({width}, seed + 1000 + static_cast<uint32_t>(i), -0.5f, 0.5f));
      const ValueId product = b.node("MatMul", {v, b.constant(weights.back())});
      v = b.node("Clip", {b.node("Add", {product, b.constant(biases.back())}), b.scalar(0.0f), b.scalar(high)});
    }
    b.output(v);
    graph = b.graph;
  }

  std::vector<double> reference(const Tensor& x) const {
    const int64_t rows = x.shape()[0], width = x.shape()[1];
    std::vector<double> v(x.as<float>(), x.as<float>() + x.numel());
    for (size_t layer = 0; layer < weights.size(); ++layer) {
      const Tensor& w = weights[layer];
      std::vector<double> next(v.size(), 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < width; ++j) {
          double sum = biases[layer].as<float>()[j];
          for (int64_t p = 0; p < width; ++p) sum += v[r * width + p] * w.as<float>()[p * width + j];
          next[r * width + j] = std::min(std::max(sum, 0.0), double(high));
        }
      v = std::move(next);
    }
    return v;
  }
};

std::unique_ptr<CompiledModel> compile_on_dnnl(const Graph& graph, int threads) {
  CompileOptions options;
  options.backends = {"dnnl"};
  options.strict = true;
  options.num_threads = threads;
  return CompiledModel::compile(graph, options);
}

void expect_matches(const ClampedLayers& model, CompiledModel& compiled, uint32_t seed) {
  Tensor x = random_uniform({model.graph.value(model.graph.inputs[0]).type.dims}, seed, -1, 1);
  const std::vector<double> want = model.reference(x);
  Tensor got = compiled.run({x.view()})[0];
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size());
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got.as<float>()[i];
    if (!(std::fabs(g - want[i]) <= 1e-4 + 1e-4 * std::fabs(want[i])) && bad++ < 5) {
      ADD_FAILURE() << "element " << i << ": " << g << ", expected " << want[i] << " (clamp at " << model.high << ")";
    }
  }
}

TEST(DnnlPrimitiveShare, RepeatedLayersAndASecondSessionCreateEachPrimitiveOnce) {
  const ClampedLayers model(6, 8, 96, 1.0f, 100);
  const dnnl_backend::SharedPrimitiveCounts before = dnnl_backend::shared_primitive_counts();
  auto first = compile_on_dnnl(model.graph, 1);
  const dnnl_backend::SharedPrimitiveCounts mid = dnnl_backend::shared_primitive_counts();
  expect_matches(model, *first, 1);
  // Six equal layers: at most the first creates (the layers' clamps may be fused or not).
  EXPECT_GE(mid.hits - before.hits, 5);
  EXPECT_LE(mid.created - before.created, 2);
  auto second = compile_on_dnnl(model.graph, 1);
  const dnnl_backend::SharedPrimitiveCounts after = dnnl_backend::shared_primitive_counts();
  EXPECT_EQ(after.created, mid.created);
  EXPECT_GE(after.hits - mid.hits, 6);
  expect_matches(model, *second, 2);
  expect_matches(model, *first, 3);  // both sessions still run with the shared primitives
  EXPECT_LE(after.entries, 256);
}

TEST(DnnlPrimitiveShare, DescriptorsThatDifferAreNotShared) {
  // The same layers clamped at 0.25 then at 4 (fused or not, the clamp is part of the descriptor), a
  // narrower width, and two threads: each compiled after the others, each right.
  const ClampedLayers low(3, 8, 64, 0.25f, 200), high(3, 8, 64, 4.0f, 200), narrow(3, 8, 48, 4.0f, 300);
  auto a = compile_on_dnnl(low.graph, 1);
  auto b = compile_on_dnnl(high.graph, 1);
  auto c = compile_on_dnnl(narrow.graph, 1);
  auto d = compile_on_dnnl(high.graph, 2);
  expect_matches(low, *a, 4);
  expect_matches(high, *b, 5);
  expect_matches(narrow, *c, 6);
  expect_matches(high, *d, 7);
}

}  // namespace
}  // namespace tessera::testing
