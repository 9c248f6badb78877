// The pattern language: chains, DAGs, alternatives, commutativity,
// constant and attribute checks, and the single-exit rule.
#include <gtest/gtest.h>

#include "partition/pattern.h"
#include "partition_test_util.h"

namespace tessera {
namespace {

using testing_partition::GraphBuilder;

TEST(Pattern, MatchesAChainAndListsItsNodes) {
  GraphBuilder b;
  ValueId x = b.input("x");
  ValueId w = b.constant("w", {4, 4});
  ValueId bias = b.constant("bias", {4});
  ValueId m = b.node("MatMul", {x, w});
  ValueId a = b.node("Add", {m, bias});
  ValueId y = b.node("Relu", {a});
  b.output(y);
  Graph& g = b.graph;
  GraphUses uses(g);
  Pattern root = op("Relu", {op("Add", {op("MatMul", {any(), constant()}), constant()})});
  auto match = match_pattern(root, g, uses, 2);
  ASSERT_TRUE(match);
  EXPECT_EQ(match->nodes, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(match->root, 2u);
  // Rooted elsewhere it does not match.
  EXPECT_FALSE(match_pattern(root, g, uses, 1));
  // The weight must be a constant.
  Pattern needs_input = op("Relu", {op("Add", {op("MatMul", {constant(), constant()}), constant()})});
  EXPECT_FALSE(match_pattern(needs_input, g, uses, 2));
}

TEST(Pattern, CommutativeOpsMatchEitherOperandOrder) {
  for (bool swapped : {false, true}) {
    GraphBuilder b;
    ValueId x = b.input("x");
    ValueId c = b.constant("c", {1});
    ValueId r = b.node("Relu", {x});
    ValueId y = swapped ? b.node("Add", {c, r}) : b.node("Add", {r, c});
    b.output(y);
    GraphUses uses(b.graph);
    EXPECT_TRUE(match_pattern(op("Add", {op("Relu"), constant()}), b.graph, uses, 1)) << swapped;
    // Sub is not commutative.
    GraphBuilder s;
    ValueId sx = s.input("x");
    ValueId sc = s.constant("c", {1});
    ValueId sr = s.node("Relu", {sx});
    s.output(swapped ? s.node("Sub", {sc, sr}) : s.node("Sub", {sr, sc}));
    GraphUses suses(s.graph);
    EXPECT_EQ(bool(match_pattern(op("Sub", {op("Relu"), constant()}), s.graph, suses, 1)), !swapped);
  }
}

TEST(Pattern, SharedPatternNodeMustBindTheSameValue) {
  // y = x * sigmoid(x) (SiLU): x is read twice.
  GraphBuilder b;
  ValueId x = b.input("x");
  ValueId other = b.input("other");
  ValueId s = b.node("Sigmoid", {x});
  b.output(b.node("Mul", {x, s}));
  ValueId s2 = b.node("Sigmoid", {other});
  b.output(b.node("Mul", {x, s2}));  // not SiLU: the Sigmoid reads another value
  GraphUses uses(b.graph);
  Pattern v = any();
  Pattern silu = op("Mul", {v, op("Sigmoid", {v})});
  EXPECT_TRUE(match_pattern(silu, b.graph, uses, 1));
  EXPECT_FALSE(match_pattern(silu, b.graph, uses, 3));
}

TEST(Pattern, IntermediateValuesMustNotEscape) {
  GraphBuilder b;
  ValueId x = b.input("x");
  ValueId a = b.node("Exp", {x});
  ValueId y = b.node("Relu", {a});
  b.output(y);
  Graph escaped_to_node = b.graph;
  GraphBuilder c = b;
  b.output(b.node("Neg", {a}));  // the Exp's output has a reader outside the pattern
  Pattern root = op("Relu", {op("Exp")});
  GraphUses uses(b.graph);
  EXPECT_FALSE(match_pattern(root, b.graph, uses, 1));
  c.output(a);  // the Exp's output is a graph output
  GraphUses cuses(c.graph);
  EXPECT_FALSE(match_pattern(root, c.graph, cuses, 1));
  GraphUses fine(escaped_to_node);
  EXPECT_TRUE(match_pattern(root, escaped_to_node, fine, 1));
}

TEST(Pattern, AlternativesScalarsAttributesPredicatesAndExclusion) {
  GraphBuilder b;
  ValueId x = b.input("x");
  ValueId half = b.scalar("half", 0.5f);
  ValueId t = b.node("Transpose", {x});
  b.graph.nodes.back().attrs.set("perm", Attribute::of_ints({1, 0}));
  ValueId y = b.node("Mul", {t, half});
  b.output(y);
  GraphUses uses(b.graph);
  EXPECT_TRUE(match_pattern(op("Mul", {op_in({"Relu", "Transpose"}), scalar(0.5)}), b.graph, uses, 1));
  EXPECT_FALSE(match_pattern(op("Mul", {op("Transpose"), scalar(2.0)}), b.graph, uses, 1));
  EXPECT_TRUE(match_pattern(either({op("Add"), op("Mul")}), b.graph, uses, 1));
  Pattern with_attr = op("Transpose");
  with_attr.attr("missing", int64_t{1});
  EXPECT_FALSE(match_pattern(op("Mul", {with_attr, any()}), b.graph, uses, 1));
  Pattern checked = op("Transpose");
  checked.where([](const Graph&, const Node& n) { return n.attrs.get_ints_or("perm", {}).size() == 2; });
  EXPECT_TRUE(match_pattern(op("Mul", {checked, any()}), b.graph, uses, 1));
  std::vector<char> excluded = {1, 0};
  EXPECT_FALSE(match_pattern(op("Mul", {op("Transpose"), any()}), b.graph, uses, 1, excluded));
  EXPECT_TRUE(match_pattern(op("Mul", {any(), any()}), b.graph, uses, 1, excluded));
  // An omitted optional input matches absent() only.
  GraphBuilder clip;
  ValueId cx = clip.input("x");
  ValueId hi = clip.scalar("hi", 6.0f);
  clip.output(clip.node("Clip", {cx, kNoValue, hi}));
  GraphUses cuses(clip.graph);
  EXPECT_TRUE(match_pattern(op("Clip", {any(), absent(), constant()}), clip.graph, cuses, 0));
  EXPECT_FALSE(match_pattern(op("Clip", {any(), constant(), constant()}), clip.graph, cuses, 0));
}

}  // namespace
}  // namespace tessera
