// Tests of check_inferred_types: stored types that agree with shape inference
// pass; a wrong dtype, dim, rank, a static dim where only data decides it, an
// unknown op or a wrong arity is a user error naming the node and value. Also
// that a graph saved and loaded through an artifact still passes.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "artifact/artifact.h"
#include "ir/error.h"
#include "passes/check_inferred_types.h"
#include "unit/expect_error.h"

namespace tessera {
namespace {

/// x[batch x 4] → MatMul(w 4x8) → y[batch x 8] → Reshape(shape) → r → Relu → out.
struct SmallGraph {
  Graph graph;
  ValueId y = kNoValue;
  ValueId r = kNoValue;
  ValueId shape = kNoValue;
};

SmallGraph make_graph(int64_t batch = 1, std::vector<int64_t> reshape_to = {8, 1}) {
  SmallGraph s;
  Graph& g = s.graph;
  ValueId x = g.add_value("x", TensorType::make(DType::kFloat32, {batch, 4}));
  ValueId w = g.add_constant("w", Tensor(DType::kFloat32, {4, 8}));
  Tensor shape_values(DType::kInt64, {static_cast<int64_t>(reshape_to.size())});
  for (size_t i = 0; i < reshape_to.size(); ++i) shape_values.as<int64_t>()[i] = reshape_to[i];
  s.shape = g.add_constant("shape", shape_values);
  s.y = g.add_value("y", TensorType::make(DType::kFloat32, {batch, 8}));
  s.r = g.add_value("r", TensorType::make(DType::kFloat32, {8, 1}));
  ValueId out = g.add_value("out", TensorType::make(DType::kFloat32, {8, 1}));
  g.nodes.push_back(Node{.name = "mm", .op_type = "MatMul", .opset = 13, .inputs = {x, w}, .outputs = {s.y}});
  g.nodes.push_back(Node{.name = "reshape", .op_type = "Reshape", .opset = 14, .inputs = {s.y, s.shape}, .outputs = {s.r}});
  g.nodes.push_back(Node{.name = "relu", .op_type = "Relu", .opset = 14, .inputs = {s.r}, .outputs = {out}});
  g.inputs = {x};
  g.outputs = {out};
  return s;
}

void expect_user_error(const Graph& graph, const std::string& expected) {
  EXPECT_USER_ERROR(check_inferred_types(graph), expected);
}

TEST(CheckInferredTypes, ConsistentGraphPasses) {
  SmallGraph s = make_graph();
  EXPECT_NO_THROW(check_inferred_types(s.graph));
}

TEST(CheckInferredTypes, WrongStoredShapeNamesNodeAndValue) {
  SmallGraph s = make_graph();
  s.graph.value(s.y).type = TensorType::make(DType::kFloat32, {1, 4});
  expect_user_error(s.graph, "inconsistent plan: node 'mm' (MatMul): output 'y' is stored as float32[1x4], its inputs give float32[1x8]");
}

TEST(CheckInferredTypes, WrongDtypeOrRank) {
  SmallGraph s = make_graph();
  s.graph.value(s.y).type = TensorType::make(DType::kInt64, {1, 8});
  expect_user_error(s.graph, "output 'y' is stored as int64[1x8], its inputs give float32[1x8]");
  s = make_graph();
  s.graph.value(s.y).type = TensorType::make(DType::kFloat32, {1, 8, 1});
  expect_user_error(s.graph, "output 'y' is stored as float32[1x8x1]");
  s = make_graph();
  s.graph.value(s.y).type = TensorType{.dtype = DType::kFloat32};
  expect_user_error(s.graph, "output 'y' is stored as float32[?], its inputs give float32[1x8]");
}

TEST(CheckInferredTypes, ConstantInputValuesDriveInference) {
  // Same stored types, but the Reshape target says 4x2: r's stored 8x1 is now wrong.
  SmallGraph s = make_graph(1, {4, 2});
  expect_user_error(s.graph, "node 'reshape' (Reshape): output 'r' is stored as float32[8x1], its inputs give float32[4x2]");
}

TEST(CheckInferredTypes, StaticDimWhereInferenceCannotKnowIt) {
  SmallGraph s = make_graph(-1);
  // Inference gives y [?x8]; a stored static batch would let a plan allocate too little.
  s.graph.value(s.y).type = TensorType::make(DType::kFloat32, {1, 8});
  expect_user_error(s.graph, "output 'y' is stored as float32[1x8], its inputs give float32[?x8]");
  s.graph.value(s.y).type = TensorType::make(DType::kFloat32, {-1, 8});
  EXPECT_NO_THROW(check_inferred_types(s.graph));
}

TEST(CheckInferredTypes, UnknownOpAndWrongArityAreUserErrors) {
  SmallGraph s = make_graph();
  s.graph.nodes[2].op_type = "NoSuchOp";
  expect_user_error(s.graph, "inconsistent plan: node 'relu' (NoSuchOp): unknown op");
  s = make_graph();
  ValueId extra = s.graph.add_value("extra", TensorType::make(DType::kFloat32, {1}));
  s.graph.nodes[0].outputs.push_back(extra);
  expect_user_error(s.graph, "node 'mm' (MatMul): has 2 inputs and 2 outputs");
  s = make_graph();
  s.graph.nodes[2].outputs.clear();
  expect_user_error(s.graph, "node 'relu' (Relu): has 1 inputs and 0 outputs");
}

TEST(CheckInferredTypes, InputDtypeTheOpDoesNotAccept) {
  SmallGraph s = make_graph();
  s.graph.value(s.r).type = TensorType::make(DType::kBool, {8, 1});
  expect_user_error(s.graph, "inconsistent plan");
}

TEST(CheckInferredTypes, GraphLoadedFromAnArtifactPasses) {
  SmallGraph s = make_graph();
  Artifact artifact;
  artifact.graph = s.graph;
  artifact.backends = {"native"};
  artifact.regions = {ArtifactRegion{.backend = "native", .nodes = {0, 1, 2}}};
  artifact.decisions.assign(3, NodeDecision{0, "fallback", {""}});
  std::string path = ::testing::TempDir() + "tessera_check_types_" + std::to_string(::getpid()) + ".tsr";
  save_artifact(path, artifact);
  Artifact loaded = load_artifact(path);
  std::filesystem::remove(path);
  EXPECT_NO_THROW(check_inferred_types(loaded.graph));
  loaded.graph.value(loaded.graph.find_value("r")).type.dims = {1, 8};
  expect_user_error(loaded.graph, "output 'r' is stored as float32[1x8], its inputs give float32[8x1]");
}

}  // namespace
}  // namespace tessera
