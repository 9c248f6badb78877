// The shared patterns: the decomposed LayerNorm matches what exporters write
// (and nothing that only looks like it), and its body parses into its parts.
#include <gtest/gtest.h>

#include "partition/common_patterns.h"
#include "partition/declarations.h"
#include "partition/partitioner.h"
#include "partition_test_util.h"

namespace tessera {
namespace {

using testing_partition::GraphBuilder;

ValueId int64s(GraphBuilder& b, const std::string& name, std::vector<int64_t> values) {
  Tensor t(DType::kInt64, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.as<int64_t>()[i] = values[i];
  return b.graph.add_constant(name, t);
}

/// x [2, 3] → layer norm over the last axis as torch exports it before opset 17.
Graph decomposed_layer_norm(int64_t axis, Shape scale_shape) {
  GraphBuilder b;
  ValueId x = b.input("x");
  ValueId mean = b.node("ReduceMean", {x, int64s(b, "axes", {axis})});
  ValueId centred = b.node("Sub", {x, mean});
  ValueId squared = b.node("Pow", {centred, b.scalar("two", 2.0f)});
  ValueId variance = b.node("ReduceMean", {squared, int64s(b, "axes2", {axis})});
  ValueId shifted = b.node("Add", {variance, b.scalar("eps", 1e-5f)});
  ValueId deviation = b.node("Sqrt", {shifted});
  ValueId normalised = b.node("Div", {centred, deviation});
  ValueId scaled = b.node("Mul", {normalised, b.constant("scale", scale_shape)});
  b.output(b.node("Add", {b.constant("bias", {3}), scaled}));  // operands swapped: Add is commutative
  return b.graph;
}

TEST(CommonPatterns, DecomposedLayerNormMatchesAndParses) {
  for (int64_t axis : {-1, 1}) {
    Graph g = decomposed_layer_norm(axis, {3});
    GraphUses uses(g);
    auto match = match_pattern(layer_norm_pattern(any()), g, uses, g.nodes.size() - 1);
    ASSERT_TRUE(match) << "axis " << axis;
    EXPECT_EQ(match->nodes.size(), 9u);
    // Through the partitioner: one composite, whose body parses into x, scale, bias and epsilon.
    Declarations d;
    d.pattern("LayerNorm", layer_norm_pattern(any()));
    d.any_op([](const Graph&, const Node&) { return SupportDecision{true, ""}; });
    PartitionResult p = partition_graph(g, {{"a", &d}}, PartitionPolicy{});
    ASSERT_EQ(p.regions.size(), 1u);
    ASSERT_EQ(p.regions[0].composites.size(), 1u);
    RegionGraph region = extract_region(g, p.regions[0]);
    const Node& composite = region.graph.nodes[0];
    const Graph& body = *composite.attrs.find("body")->graph;
    std::optional<LayerNormParts> parts = parse_layer_norm_body(body);
    ASSERT_TRUE(parts);
    auto name_of = [&](size_t index) { return region.graph.value(composite.inputs[index]).name; };
    EXPECT_EQ(name_of(parts->input), "x");
    EXPECT_EQ(name_of(parts->scale), "scale");
    EXPECT_EQ(name_of(parts->bias), "bias");
    EXPECT_EQ(name_of(parts->epsilon), "eps");
  }
}

TEST(CommonPatterns, LookAlikesDoNotMatch) {
  // Reducing over another axis is not a layer norm over the last one.
  Graph first_axis = decomposed_layer_norm(0, {3});
  GraphUses uses(first_axis);
  EXPECT_FALSE(match_pattern(layer_norm_pattern(any()), first_axis, uses, first_axis.nodes.size() - 1));
  // A scale that is not 1-D over the last axis.
  Graph wide_scale = decomposed_layer_norm(-1, {2, 3});
  GraphUses wide_uses(wide_scale);
  EXPECT_FALSE(match_pattern(layer_norm_pattern(any()), wide_scale, wide_uses, wide_scale.nodes.size() - 1));
  // A backend's check applies to every node of the pattern.
  Graph g = decomposed_layer_norm(-1, {3});
  GraphUses g_uses(g);
  NodeCheck no_sqrt = [](const Graph&, const Node& n) { return n.op_type != "Sqrt"; };
  EXPECT_FALSE(match_pattern(layer_norm_pattern(any(), no_sqrt), g, g_uses, g.nodes.size() - 1));
}

}  // namespace
}  // namespace tessera
