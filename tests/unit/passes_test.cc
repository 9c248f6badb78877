// The native backend's ConvActivation pattern (Conv followed by Relu or
// Clip, fused into the Conv's epilogue) keeps results and only fuses where it may.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/verifier.h"
#include "runtime/session.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

/// The pattern belongs to the native backend, so these models compile with it alone.
CompileOptions native_only() {
  CompileOptions options;
  options.backends = {"native"};
  return options;
}

/// x -> Conv(w, b) -> c; then `activation` (Relu or Clip[0,6]) on c -> y.
/// With extra_reader, c also feeds a second output (so it must not fuse).
Graph conv_activation_graph(const std::string& activation, bool extra_reader) {
  Graph g;
  ValueId x = g.add_value("x", TensorType::make(DType::kFloat32, {1, 3, 9, 9}));
  ValueId w = g.add_constant("w", random_float({4, 3, 3, 3}, 3));
  Tensor bias = random_float({4}, 4);
  for (int i = 0; i < 4; ++i) bias.as<float>()[i] *= 4;  // push some outputs past the clip bounds
  ValueId b = g.add_constant("b", bias);
  ValueId c = g.add_value("c");
  ValueId y = g.add_value("y");
  g.inputs = {x};
  Node conv{.name = "conv", .op_type = "Conv", .opset = 13, .inputs = {x, w, b}, .outputs = {c}};
  conv.attrs.set("pads", Attribute::of_ints({1, 1, 1, 1}));
  g.nodes.push_back(conv);
  Node act{.name = "act", .op_type = activation, .opset = 13, .inputs = {c}, .outputs = {y}};
  if (activation == "Clip") {
    act.inputs.push_back(g.add_constant("lo", make_float({}, {0.0f})));
    act.inputs.push_back(g.add_constant("hi", make_float({}, {6.0f})));
  }
  g.nodes.push_back(act);
  g.outputs = {y};
  if (extra_reader) {
    ValueId z = g.add_value("z");
    g.nodes.push_back(Node{.name = "neg", .op_type = "Neg", .opset = 13, .inputs = {c}, .outputs = {z}});
    g.outputs.push_back(z);
  }
  return g;
}

TEST(ConvActivationPattern, FusedConvMatchesConvThenActivation) {
  for (const std::string activation : {"Relu", "Clip"}) {
    Graph g = conv_activation_graph(activation, false);
    auto fused = CompiledModel::compile(g, native_only());
    ASSERT_EQ(fused->regions().size(), 1u) << activation;
    ASSERT_EQ(fused->regions()[0].composites.size(), 1u);
    EXPECT_EQ(fused->regions()[0].composites[0], "ConvActivation: conv, act");
    // The unfused reference: the same graph, with the Conv's output also read elsewhere.
    Graph reference = conv_activation_graph(activation, true);
    auto unfused = CompiledModel::compile(reference, native_only());
    EXPECT_TRUE(unfused->regions()[0].composites.empty());
    Tensor x = random_float({1, 3, 9, 9}, 11);
    x.as<float>()[40] = NAN;
    Tensor got = fused->run({x.view()})[0];
    Tensor want = unfused->run({x.view()})[0];
    expect_close(got, want, 0, 0);
    float lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < got.numel(); ++i) {
      if (std::isnan(got.as<float>()[i])) continue;
      lo = std::min(lo, got.as<float>()[i]);
      hi = std::max(hi, got.as<float>()[i]);
    }
    EXPECT_EQ(lo, 0.0f);  // the clamp really applied
    if (activation == "Clip") EXPECT_EQ(hi, 6.0f);
  }
}

TEST(ConvActivationPattern, LeavesGraphOutputsAndSharedValuesAlone) {
  auto shared = CompiledModel::compile(conv_activation_graph("Relu", true), native_only());
  EXPECT_TRUE(shared->regions()[0].composites.empty());
  Graph exposed = conv_activation_graph("Relu", false);
  exposed.outputs.push_back(exposed.nodes[0].outputs[0]);  // the Conv's output is also a graph output
  auto exposed_model = CompiledModel::compile(exposed, native_only());
  EXPECT_TRUE(exposed_model->regions()[0].composites.empty());
  Tensor x = random_float({1, 3, 9, 9}, 5);
  std::vector<Tensor> out = exposed_model->run({x.view()});
  ASSERT_EQ(out.size(), 2u);
  for (int64_t i = 0; i < out[0].numel(); ++i) EXPECT_EQ(out[0].as<float>()[i], std::max(0.0f, out[1].as<float>()[i]));
}

TEST(ConvActivationPattern, PlacementNamesTheFusedNode) {
  auto model = CompiledModel::compile(conv_activation_graph("Relu", false), native_only());
  bool found = false;
  for (const NodePlacement& p : model->placement()) {
    if (p.node_name == "act") {
      found = true;
      EXPECT_EQ(p.backend, "native");
      EXPECT_EQ(p.note, "fused into 'conv' (pattern ConvActivation)");
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tessera::testing
