// Compiled control-flow bodies in artifacts (format version 2): each body the
// model compiled is stored with its plan and loaded from it, so a loaded model
// runs its bodies as they were compiled (placement selectors, measurements and
// all) without compiling them again; an outer weight a body captures is stored
// once; a version-1 artifact (no bodies) still loads, compiling them; a stored
// body that does not fit its node, or damaged bytes in the bodies' section, are
// user errors, never a crash.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "artifact/artifact_internal.h"
#include "expect_error.h"
#include "frontend/onnx/onnx_importer.h"
#include "ir/error.h"
#include "onnx_proto_builder.h"
#include "runtime/session.h"

namespace tessera {
namespace {

using onnx::TensorProto;
using testing::add_graph_attr;
using testing::add_node;
using testing::add_value_info;
using testing::model_of;

float weight(size_t i) { return static_cast<float>(static_cast<int>(i % 13) - 6) * 0.25f; }
float constant(size_t i) { return static_cast<float>(i % 7) * 0.5f; }

/// y = If(cond, then: Relu(x + W), else: (x - c) * x), x and W float[n]: W an outer weight the then-branch
/// captures, c the else-branch's own initializer.
std::string if_model(int64_t n) {
  onnx::GraphProto g;
  add_value_info(g.mutable_input(), "cond", TensorProto::BOOL, {});
  add_value_info(g.mutable_input(), "x", TensorProto::FLOAT, {n});
  auto* w = g.add_initializer();
  w->set_name("W");
  w->set_data_type(TensorProto::FLOAT);
  w->add_dims(n);
  for (int64_t i = 0; i < n; ++i) w->add_float_data(weight(static_cast<size_t>(i)));
  onnx::GraphProto then_g;
  then_g.set_name("then");
  add_node(&then_g, "Add", {"x", "W"}, {"sum"})->set_name("then_add");
  add_node(&then_g, "Relu", {"sum"}, {"t"})->set_name("then_relu");
  add_value_info(then_g.mutable_output(), "t", TensorProto::FLOAT, {n});
  onnx::GraphProto else_g;
  else_g.set_name("else");
  auto* c = else_g.add_initializer();
  c->set_name("c");
  c->set_data_type(TensorProto::FLOAT);
  c->add_dims(n);
  for (int64_t i = 0; i < n; ++i) c->add_float_data(constant(static_cast<size_t>(i)));
  add_node(&else_g, "Sub", {"x", "c"}, {"d"})->set_name("else_sub");
  add_node(&else_g, "Mul", {"d", "x"}, {"e"})->set_name("else_mul");
  add_value_info(else_g.mutable_output(), "e", TensorProto::FLOAT, {n});
  auto* node = add_node(&g, "If", {"cond"}, {"y"});
  node->set_name("branch");
  add_graph_attr(node, "then_branch", then_g);
  add_graph_attr(node, "else_branch", else_g);
  add_value_info(g.mutable_output(), "y", TensorProto::FLOAT, {n});
  return model_of(g).SerializeAsString();
}

/// Compiled on the test backend and native, the then-branch's Add kept off the test backend: a body
/// compiled again at load (on the artifact's backends, without the selector) would put it there.
std::unique_ptr<CompiledModel> compile_if_model(int64_t n) {
  CompileOptions options;
  options.backends = {"test", "native"};
  options.deny = {{"test", "Add"}};
  return CompiledModel::compile(onnx_frontend::import_onnx_bytes(if_model(n), ""), options);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera_body_artifact_" + name)).string();
}

/// Where the node at `path` inside the If's bodies runs, "" when it is not listed.
std::string backend_inside(const CompiledModel& model, const std::string& path) {
  for (size_t row = 0; row < model.placement().size(); ++row) {
    if (model.placement()[row].op_type != "If") continue;
    for (const InnerNodePlacement& inner : model.inner_placement(row)) {
      if (inner.path == path) return inner.backend;
    }
  }
  return "";
}

std::string if_note(const CompiledModel& model) {
  for (const NodePlacement& p : model.placement()) {
    if (p.op_type == "If") return p.note;
  }
  return "";
}

/// Runs both branches and compares them with the model's definition (float32 arithmetic, exact here).
void expect_branches_right(const CompiledModel& model, int64_t n) {
  Tensor x(DType::kFloat32, {n});
  for (int64_t i = 0; i < n; ++i) x.as<float>()[i] = static_cast<float>(i % 11) * 0.375f - 1.5f;
  for (bool cond : {true, false}) {
    Tensor c(DType::kBool, {});
    *c.as<uint8_t>() = cond;
    const std::vector<Tensor> out = model.run({c.view(), x.view()});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].numel(), n);
    for (int64_t i = 0; i < n; ++i) {
      const float xi = x.as<float>()[i];
      const float want = cond ? std::max(xi + weight(static_cast<size_t>(i)), 0.0f) : (xi - constant(static_cast<size_t>(i))) * xi;
      ASSERT_EQ(out[0].as<float>()[i], want) << (cond ? "then" : "else") << " at " << i;
    }
  }
}

TEST(BodyArtifact, EachCompiledBodyIsStoredAndLoadedAsCompiled) {
  const int64_t n = 64;
  auto compiled = compile_if_model(n);
  ASSERT_EQ(backend_inside(*compiled, "then_branch/then_add"), "native");
  ASSERT_EQ(backend_inside(*compiled, "then_branch/then_relu"), "test");
  ASSERT_EQ(backend_inside(*compiled, "else_branch/else_sub"), "test");
  const std::string path = temp_path("stored.tsr");
  compiled->save(path);

  const Artifact artifact = load_artifact(path);
  ASSERT_EQ(artifact.bodies.size(), 2u);  // then and else
  for (const ArtifactBody& body : artifact.bodies) {
    EXPECT_NE(body.key.find("/once"), std::string::npos) << body.key;
    ASSERT_TRUE(body.plan);
    EXPECT_FALSE(body.plan->regions.empty());
  }
  EXPECT_NE(artifact.bodies[0].key, artifact.bodies[1].key);

  auto loaded = CompiledModel::load(path, {});
  EXPECT_EQ(backend_inside(*loaded, "then_branch/then_add"), "native");  // the selector's choice, kept
  EXPECT_EQ(backend_inside(*loaded, "then_branch/then_relu"), "test");
  EXPECT_EQ(if_note(*loaded), if_note(*compiled));
  expect_branches_right(*loaded, n);

  // Saved again from the loaded model, the bodies stay stored.
  const std::vector<uint8_t> again = loaded->serialize();
  const Artifact reloaded = load_artifact_from_memory(again, nullptr, "again.tsr");
  EXPECT_EQ(reloaded.bodies.size(), 2u);
  std::filesystem::remove(path);
}

TEST(BodyArtifact, AVersionOneArtifactCompilesItsBodiesAtLoad) {
  // The same plan without its bodies, as format version 1 wrote it: loading compiles the bodies on the
  // artifact's backends, without the selector, so the Add goes to the test backend.
  const int64_t n = 64;
  Artifact artifact;
  {
    const std::string path = temp_path("v2.tsr");
    compile_if_model(n)->save(path);
    artifact = load_artifact(path);
    std::filesystem::remove(path);
  }
  artifact.bodies.clear();
  std::vector<uint8_t> bytes = artifact_bytes(artifact);
  bytes[artifact_internal::kVersionOffset] = 1;
  const uint64_t sum = artifact_internal::artifact_checksum(bytes);
  std::memcpy(bytes.data() + artifact_internal::kChecksumOffset, &sum, sizeof sum);  // little-endian host
  auto loaded = CompiledModel::load_from_memory(bytes, nullptr, "v1.tsr", {});
  EXPECT_EQ(backend_inside(*loaded, "then_branch/then_add"), "test");
  expect_branches_right(*loaded, n);
}

TEST(BodyArtifact, AnOuterWeightABodyCapturesIsStoredOnce) {
  const int64_t n = 1 << 16;  // 256 KiB of float32 weights
  const std::string path = temp_path("once.tsr");
  compile_if_model(n)->save(path);
  const auto size = static_cast<int64_t>(std::filesystem::file_size(path));
  // W once (256 KiB) and c once (256 KiB, the else-branch's own); a second copy of W would add 256 KiB.
  EXPECT_LT(size, 2 * n * 4 + n * 4 / 2) << size;
  auto loaded = CompiledModel::load(path, {});
  expect_branches_right(*loaded, n);
  std::filesystem::remove(path);
}

Artifact saved_if_artifact(int64_t n) {
  const std::string path = temp_path("edit.tsr");
  compile_if_model(n)->save(path);
  Artifact artifact = load_artifact(path);
  std::filesystem::remove(path);
  return artifact;
}

TEST(BodyArtifact, AStoredBodyThatDoesNotFitItsNodeIsAUserError) {
  const int64_t n = 16;
  {
    Artifact artifact = saved_if_artifact(n);
    for (ArtifactBody& body : artifact.bodies) body.fed.push_back(7);
    const std::vector<uint8_t> bytes = artifact_bytes(artifact);
    EXPECT_USER_ERROR(CompiledModel::load_from_memory(bytes, nullptr, "fed.tsr", {}), "does not fit the body it is stored for");
  }
  {
    // A plan whose input is int64 where the node feeds float32.
    Artifact artifact = saved_if_artifact(n);
    for (ArtifactBody& body : artifact.bodies) {
      Graph& g = body.plan->graph;
      g.value(g.inputs[0]).type.dtype = DType::kInt64;
    }
    const std::vector<uint8_t> bytes = artifact_bytes(artifact);
    EXPECT_USER_ERROR(CompiledModel::load_from_memory(bytes, nullptr, "dtype.tsr", {}), "compiled body");
  }
}

TEST(BodyArtifact, DamagedBodiesAreUserErrorsNeverCrashes) {
  // Every byte of the bodies' section flipped in turn (the checksum fixed, so the manifest's own checks
  // meet it): each load either works or fails with a user error.
  const int64_t n = 8;
  const std::vector<uint8_t> good = artifact_bytes(saved_if_artifact(n));
  const artifact_internal::Header header = artifact_internal::decode_header(good.data());
  const auto manifest = good.begin() + static_cast<ptrdiff_t>(header.manifest_offset);
  const auto manifest_end = manifest + static_cast<ptrdiff_t>(header.manifest_size);
  const char tag[] = "BODS";
  const auto at = std::search(manifest, manifest_end, tag, tag + 4);
  ASSERT_NE(at, manifest_end);
  size_t failures = 0;
  for (auto it = at; it != manifest_end; ++it) {
    std::vector<uint8_t> bytes = good;
    bytes[static_cast<size_t>(it - good.begin())] ^= 0x5A;
    const uint64_t sum = artifact_internal::artifact_checksum(bytes);
    std::memcpy(bytes.data() + artifact_internal::kChecksumOffset, &sum, sizeof sum);
    try {
      auto model = CompiledModel::load_from_memory(bytes, nullptr, "flipped.tsr", {});
    } catch (const Error& e) {
      ASSERT_NE(e.kind(), ErrorKind::kInternal) << "byte " << (it - manifest) << ": " << e.what();
      ++failures;
    }
  }
  EXPECT_GT(failures, 0u);
}

}  // namespace
}  // namespace tessera
