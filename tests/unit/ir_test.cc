// IR: dtypes, shapes, verifier, printer.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>

#include "expect_error.h"
#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/printer.h"
#include "ir/shape_util.h"
#include "ir/verifier.h"

namespace tessera {
namespace {

TEST(DType, HalfRoundTripsExactValues) {
  for (float v : {0.0f, 1.0f, -2.5f, 65504.0f, 6.103515625e-05f, 5.960464477539063e-08f}) {
    EXPECT_EQ(half_to_float(float_to_half(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
  // Round to nearest even: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(half_to_float(float_to_half(1.0f + 0.00048828125f)), 1.0f);
  EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(3.0f)), 3.0f);
}

TEST(DType, NamesRoundTrip) {
  for (DType d : {DType::kFloat32, DType::kInt64, DType::kBool, DType::kUInt8, DType::kFloat16}) {
    EXPECT_EQ(dtype_from_name(dtype_name(d)), d);
  }
}

TEST(Shape, Broadcast) {
  EXPECT_EQ(broadcast_shapes({2, 1, 4}, {3, 1}), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes({}, {5}), (Shape{5}));
  EXPECT_USER_ERROR(broadcast_shapes({2, 3}, {4, 3}), "cannot be broadcast");
  EXPECT_EQ(normalize_axis(-1, 4), 3);
  EXPECT_USER_ERROR(normalize_axis(4, 4), "out of range");
}

Graph two_node_graph() {
  Graph g;
  ValueId x = g.add_value("x", TensorType::make(DType::kFloat32, {2}));
  ValueId w = g.add_constant("w", Tensor(DType::kFloat32, {2}));
  ValueId s = g.add_value("s");
  ValueId y = g.add_value("y");
  g.inputs = {x};
  g.outputs = {y};
  g.nodes.push_back(Node{.name = "add", .op_type = "Add", .opset = 14, .inputs = {x, w}, .outputs = {s}});
  g.nodes.push_back(Node{.name = "relu", .op_type = "Relu", .opset = 14, .inputs = {s}, .outputs = {y}});
  return g;
}

TEST(Verifier, AcceptsValidGraph) { EXPECT_NO_THROW(verify_graph(two_node_graph())); }

TEST(Verifier, RejectsOutOfOrderNodes) {
  Graph g = two_node_graph();
  std::swap(g.nodes[0], g.nodes[1]);
  EXPECT_INTERNAL_ERROR(verify_graph(g), "reads 's'");
}

TEST(Verifier, RejectsDoubleDefinition) {
  Graph g = two_node_graph();
  g.nodes[1].outputs = {g.nodes[0].outputs[0]};
  EXPECT_INTERNAL_ERROR(verify_graph(g), "defined more than once");
}

TEST(Verifier, RejectsUndefinedOutput) {
  Graph g = two_node_graph();
  g.outputs.push_back(g.add_value("dangling"));
  EXPECT_INTERNAL_ERROR(verify_graph(g), "'dangling' is never defined");
}

// The error expectations (expect_error.h) fail on the wrong kind, the wrong
// message, another exception and no exception at all.
TEST(ErrorExpectations, FailUnlessKindAndMessageMatch) {
  EXPECT_USER_ERROR(throw_user_error("node 'a' (Add): bad"), "node 'a'");
  EXPECT_UNSUPPORTED_ERROR(throw_unsupported("op X"), "X");
  EXPECT_INTERNAL_ERROR(throw_internal_error("bug"), "");
  EXPECT_NONFATAL_FAILURE(EXPECT_USER_ERROR(throw_internal_error("bug"), ""), "kind internal, expected kind user");
  EXPECT_NONFATAL_FAILURE(EXPECT_INTERNAL_ERROR(throw_user_error("bad"), ""), "kind user, expected kind internal");
  EXPECT_NONFATAL_FAILURE(EXPECT_USER_ERROR(throw_unsupported("op X"), ""), "kind unsupported, expected kind user");
  EXPECT_NONFATAL_FAILURE(EXPECT_USER_ERROR(throw_user_error("bad"), "node"), "does not mention 'node'");
  EXPECT_NONFATAL_FAILURE(EXPECT_USER_ERROR(throw std::out_of_range("at"), ""), "non-tessera exception");
  EXPECT_NONFATAL_FAILURE(EXPECT_USER_ERROR((void)0, ""), "threw nothing");
}

TEST(Printer, IsReadableAndStable) {
  Graph g = two_node_graph();
  g.nodes[0].attrs.set("note", Attribute::of_ints({1, 2}));
  EXPECT_EQ(print_graph(g),
            "graph main {\n"
            "  input %x: float32[2]\n"
            "  const %w: float32[2]\n"
            "  %s: undefined[?] = Add(%x, %w) {note=[1, 2]}  # add\n"
            "  %y: undefined[?] = Relu(%s)  # relu\n"
            "  output %y\n"
            "}\n");
}

}  // namespace
}  // namespace tessera
