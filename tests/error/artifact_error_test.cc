// .tsr artifacts through the C API: a model compiled with backends
// {test, native} (or the test backend alone, or with no node, or with an If)
// is saved, its ONNX file deleted, and the loaded artifact must run exactly
// like the compiled model; damaged files (truncated at every length, flipped
// bytes, wrong magic, a directory) and plan options given with an artifact
// must give clear user errors, never a crash. Models are built with the ONNX
// protobuf API.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace {

namespace fs = std::filesystem;

void set_type(onnx::ValueInfoProto* v, const std::string& name, int elem_type, std::initializer_list<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

void add_node(onnx::GraphProto* g, const std::string& op, std::initializer_list<std::string> inputs,
              const std::string& output) {
  auto* n = g->add_node();
  n->set_name(output + "_node");
  n->set_op_type(op);
  for (const std::string& in : inputs) n->add_input(in);
  n->add_output(output);
}

void add_float_initializer(onnx::GraphProto* g, const std::string& name, std::initializer_list<int64_t> dims) {
  auto* init = g->add_initializer();
  init->set_name(name);
  init->set_data_type(onnx::TensorProto::FLOAT);
  int64_t count = 1;
  for (int64_t d : dims) {
    init->add_dims(d);
    count *= d;
  }
  for (int64_t i = 0; i < count; ++i) init->add_float_data(std::sin(0.7f * static_cast<float>(i) + 0.3f));
}

onnx::ModelProto empty_model(int opset = 17) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(opset);
  model.mutable_graph()->set_name("g");
  return model;
}

/// x[2,3,4] → Relu (test) → Erf (native) → Add with the Relu output (test) → Sin (native);
/// outputs: the Sin result and the Relu output (also read later).
onnx::ModelProto mixed_model() {
  onnx::ModelProto model = empty_model();
  auto* g = model.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3, 4});
  add_node(g, "Relu", {"x"}, "r");
  add_node(g, "Erf", {"r"}, "e");
  add_node(g, "Add", {"r", "e"}, "s");
  add_node(g, "Sin", {"s"}, "y");
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 3, 4});
  set_type(g->add_output(), "r", onnx::TensorProto::FLOAT, {2, 3, 4});
  return model;
}

/// Only ops the test backend claims: MatMul + bias + Relu (a pattern), then Softmax.
onnx::ModelProto test_only_model() {
  onnx::ModelProto model = empty_model();
  auto* g = model.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3, 4});
  add_float_initializer(g, "w", {4, 5});
  add_float_initializer(g, "b", {5});
  add_node(g, "MatMul", {"x", "w"}, "p");
  add_node(g, "Add", {"p", "b"}, "q");
  add_node(g, "Relu", {"q"}, "h");
  add_node(g, "Softmax", {"h"}, "y");
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 3, 5});
  return model;
}

/// t = Tanh(x); If(cond) then Relu(t) else Neg(t); y = Mul(branch, t). Branches read t from outside.
onnx::ModelProto if_model() {
  onnx::ModelProto model = empty_model();
  auto* g = model.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  set_type(g->add_input(), "cond", onnx::TensorProto::BOOL, {});
  add_node(g, "Tanh", {"x"}, "t");
  auto* node = g->add_node();
  node->set_name("the_if");
  node->set_op_type("If");
  node->add_input("cond");
  node->add_output("branch");
  for (const char* branch : {"then_branch", "else_branch"}) {
    auto* attr = node->add_attribute();
    attr->set_name(branch);
    attr->set_type(onnx::AttributeProto::GRAPH);
    auto* body = attr->mutable_g();
    body->set_name(branch);
    const std::string out = std::string(branch) + "_out";
    add_node(body, std::string(branch) == "then_branch" ? "Relu" : "Neg", {"t"}, out);
    set_type(body->add_output(), out, onnx::TensorProto::FLOAT, {2, 3});
  }
  add_node(g, "Mul", {"branch", "t"}, "y");
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 3});
  return model;
}

struct Input {
  DLDataType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

Input float_input(std::vector<int64_t> shape, float seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) values[static_cast<size_t>(i)] = std::sin(seed + 1.3f * static_cast<float>(i)) * 2;
  Input in{{kDLFloat, 32, 1}, std::move(shape), {}};
  in.bytes.resize(values.size() * sizeof(float));
  std::memcpy(in.bytes.data(), values.data(), in.bytes.size());
  return in;
}

Input bool_input(bool value) { return {{TSR_DL_BOOL_CODE, 8, 1}, {}, {static_cast<uint8_t>(value)}}; }

class ArtifactTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_artifact_error_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::string write(const std::string& name, const std::string& bytes) {
    std::ofstream(path(name), std::ios::binary) << bytes;
    return path(name);
  }
  static std::string read(const std::string& file) {
    std::ifstream in(file, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  /// Compiles an ONNX model with the given backends (and strictness).
  tsr_model* compile(const onnx::ModelProto& model, const char* backends, bool strict = false) {
    const std::string onnx_path = write("model.onnx", model.SerializeAsString());
    tsr_options* options = nullptr;
    EXPECT_EQ(tsr_options_create(&options), nullptr);
    EXPECT_EQ(tsr_options_set_backends(options, backends), nullptr);
    EXPECT_EQ(tsr_options_set_strict(options, strict ? 1 : 0), nullptr);
    tsr_model* m = nullptr;
    tsr_status* status = tsr_model_load(onnx_path.c_str(), options, &m);
    tsr_options_free(options);
    EXPECT_EQ(status, nullptr) << tsr_status_message(status);
    if (status) tsr_status_free(status);
    return m;
  }

  /// Saves `compiled`, deletes the ONNX file (the artifact must not need it) and loads the artifact.
  tsr_model* save_and_reload(const tsr_model* compiled) {
    const std::string tsr = path("model.tsr");
    tsr_status* status = tsr_model_save(compiled, tsr.c_str());
    EXPECT_EQ(status, nullptr) << tsr_status_message(status);
    if (status) tsr_status_free(status);
    fs::remove(path("model.onnx"));
    EXPECT_EQ(tsr_file_is_artifact(tsr.c_str()), 1);
    tsr_model* loaded = nullptr;
    status = tsr_model_load(tsr.c_str(), nullptr, &loaded);
    EXPECT_EQ(status, nullptr) << tsr_status_message(status);
    if (status) tsr_status_free(status);
    return loaded;
  }

  /// Runs with Tessera-allocated outputs and a profile; returns each output's bytes.
  static std::vector<std::string> run(const tsr_model* m, std::vector<Input>& inputs, int64_t* copies = nullptr) {
    std::vector<DLTensor> dl;
    for (Input& in : inputs) {
      dl.push_back(DLTensor{in.bytes.data(), {kDLCPU, 0}, static_cast<int32_t>(in.shape.size()), in.dtype,
                            in.shape.data(), nullptr, 0});
    }
    const size_t n = tsr_model_output_count(m);
    std::vector<DLManagedTensor*> outputs(n, nullptr);
    tsr_run_profile profile{};
    profile.struct_size = sizeof(profile);
    tsr_status* status = tsr_model_run_with_profile(m, dl.data(), dl.size(), outputs.data(), n, &profile);
    EXPECT_EQ(status, nullptr) << tsr_status_message(status);
    if (status) {
      tsr_status_free(status);
      return {};
    }
    if (copies) *copies = profile.copies;
    std::vector<std::string> result;
    for (DLManagedTensor* t : outputs) {
      int64_t count = 1;
      for (int i = 0; i < t->dl_tensor.ndim; ++i) count *= t->dl_tensor.shape[i];
      const size_t bytes = static_cast<size_t>(count) * t->dl_tensor.dtype.bits / 8;
      result.emplace_back(static_cast<const char*>(t->dl_tensor.data), bytes);
      t->deleter(t);
    }
    return result;
  }

  static std::string report(const tsr_model* m, const char* format) {
    char* text = nullptr;
    tsr_status* status = tsr_model_report(m, format, "model", nullptr, &text);
    EXPECT_EQ(status, nullptr) << tsr_status_message(status);
    if (status) {
      tsr_status_free(status);
      return "";
    }
    std::string result = text;
    tsr_string_free(text);
    return result;
  }

  static int64_t copies_per_run(const tsr_model* m) {
    int64_t copies = -1, bytes = -1;
    EXPECT_EQ(tsr_model_copies_per_run(m, &copies, &bytes), nullptr);
    return copies;
  }

  /// The loaded artifact has the compiled model's regions and copies, and gives identical outputs.
  void expect_same_model(const tsr_model* compiled, const tsr_model* loaded, std::vector<Input> inputs) {
    ASSERT_NE(compiled, nullptr);
    ASSERT_NE(loaded, nullptr);
    ASSERT_EQ(tsr_model_region_count(loaded), tsr_model_region_count(compiled));
    for (size_t r = 0; r < tsr_model_region_count(compiled); ++r) {
      tsr_region_info a{}, b{};
      a.struct_size = b.struct_size = sizeof(tsr_region_info);
      ASSERT_EQ(tsr_model_region_info(compiled, r, &a), nullptr);
      ASSERT_EQ(tsr_model_region_info(loaded, r, &b), nullptr);
      EXPECT_STREQ(a.backend, b.backend);
      EXPECT_STREQ(a.memory_space, b.memory_space);
      EXPECT_EQ(a.node_count, b.node_count);
      EXPECT_EQ(a.input_count, b.input_count);
      EXPECT_EQ(a.output_count, b.output_count);
      EXPECT_EQ(a.payload_bytes, b.payload_bytes);
    }
    EXPECT_EQ(copies_per_run(loaded), copies_per_run(compiled));
    // Every report of the plan (placement, reasons, regions, copies) survives the round trip.
    for (const char* format : {"table", "json", "dot"}) {
      EXPECT_EQ(report(loaded, format), report(compiled, format)) << format;
    }
    int64_t compiled_copies = -1, loaded_copies = -1;
    const std::vector<std::string> expected = run(compiled, inputs, &compiled_copies);
    const std::vector<std::string> actual = run(loaded, inputs, &loaded_copies);
    EXPECT_EQ(actual, expected);
    EXPECT_EQ(loaded_copies, copies_per_run(compiled));
    EXPECT_EQ(compiled_copies, copies_per_run(compiled));
  }

  /// Loading `file` fails with a user error (never internal) whose message has every part.
  static void expect_load_error(const std::string& file, std::initializer_list<std::string> parts,
                                const tsr_options* options = nullptr) {
    tsr_model* m = nullptr;
    tsr_status* status = tsr_model_load(file.c_str(), options, &m);
    ASSERT_NE(status, nullptr) << "loading " << file << " succeeded";
    EXPECT_EQ(m, nullptr);
    const std::string message = tsr_status_message(status);
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << message;
    for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
    tsr_status_free(status);
  }

  /// A valid artifact of the mixed model; returns its bytes.
  std::string mixed_artifact_bytes() {
    tsr_model* m = compile(mixed_model(), "test,native");
    const std::string file = path("good.tsr");
    EXPECT_EQ(tsr_model_save(m, file.c_str()), nullptr);
    tsr_model_free(m);
    return read(file);
  }

  fs::path dir_;
};

TEST_F(ArtifactTest, MixedPartitionRunsLikeTheCompiledModelWithoutTheOnnxFile) {
  tsr_model* compiled = compile(mixed_model(), "test,native");
  ASSERT_NE(compiled, nullptr);
  ASSERT_EQ(tsr_model_region_count(compiled), 4u);  // test, native, test, native
  tsr_model* loaded = save_and_reload(compiled);
  EXPECT_FALSE(fs::exists(path("model.onnx")));
  expect_same_model(compiled, loaded, {float_input({2, 3, 4}, 0.5f)});
  // And the partitioned result is the native one.
  tsr_model* native = compile(mixed_model(), "native");
  std::vector<Input> inputs = {float_input({2, 3, 4}, 0.5f)};
  const std::vector<std::string> mixed = run(loaded, inputs), reference = run(native, inputs);
  ASSERT_EQ(mixed.size(), reference.size());
  for (size_t k = 0; k < mixed.size(); ++k) {
    ASSERT_EQ(mixed[k].size(), reference[k].size());
    const auto* a = reinterpret_cast<const float*>(mixed[k].data());
    const auto* b = reinterpret_cast<const float*>(reference[k].data());
    for (size_t i = 0; i < mixed[k].size() / sizeof(float); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << k << ":" << i;
  }
  tsr_model_free(native);
  tsr_model_free(loaded);
  tsr_model_free(compiled);
}

TEST_F(ArtifactTest, StrictTestBackendOnlyRoundTrips) {
  tsr_model* compiled = compile(test_only_model(), "test", /*strict=*/true);
  ASSERT_NE(compiled, nullptr);
  ASSERT_EQ(tsr_model_region_count(compiled), 1u);
  tsr_region_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(tsr_model_region_info(compiled, 0, &info), nullptr);
  EXPECT_STREQ(info.backend, "test");
  EXPECT_GT(info.payload_bytes, 0u);
  tsr_model* loaded = save_and_reload(compiled);
  expect_same_model(compiled, loaded, {float_input({2, 3, 4}, 1.5f)});
  tsr_model_free(loaded);
  tsr_model_free(compiled);
}

TEST_F(ArtifactTest, GraphWithoutNodesRoundTrips) {
  onnx::ModelProto model = empty_model();
  auto* g = model.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  set_type(g->add_output(), "x", onnx::TensorProto::FLOAT, {2, 3});
  add_float_initializer(g, "c", {3});
  set_type(g->add_output(), "c", onnx::TensorProto::FLOAT, {3});
  tsr_model* compiled = compile(model, "test,native");
  ASSERT_NE(compiled, nullptr);
  EXPECT_EQ(tsr_model_region_count(compiled), 0u);
  tsr_model* loaded = save_and_reload(compiled);
  std::vector<Input> inputs = {float_input({2, 3}, 2.5f)};
  expect_same_model(compiled, loaded, inputs);
  const std::vector<std::string> outputs = run(loaded, inputs);
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0], std::string(inputs[0].bytes.begin(), inputs[0].bytes.end()));
  ASSERT_EQ(outputs[1].size(), 3 * sizeof(float));
  EXPECT_EQ(reinterpret_cast<const float*>(outputs[1].data())[2], std::sin(0.7f * 2 + 0.3f));
  tsr_model_free(loaded);
  tsr_model_free(compiled);
}

TEST_F(ArtifactTest, ControlFlowRoundTripsAndTakesBothBranches) {
  tsr_model* compiled = compile(if_model(), "test,native");
  ASSERT_NE(compiled, nullptr);
  std::vector<std::string> backends;
  for (size_t r = 0; r < tsr_model_region_count(compiled); ++r) {
    tsr_region_info info{};
    info.struct_size = sizeof(info);
    ASSERT_EQ(tsr_model_region_info(compiled, r, &info), nullptr);
    backends.push_back(info.backend);
  }
  // Tanh and Mul on the test backend, the If on native.
  EXPECT_EQ(backends, (std::vector<std::string>{"test", "native", "test"}));
  tsr_model* loaded = save_and_reload(compiled);
  for (bool cond : {true, false}) {
    SCOPED_TRACE(cond ? "then" : "else");
    std::vector<Input> inputs = {float_input({2, 3}, 0.1f), bool_input(cond)};
    expect_same_model(compiled, loaded, inputs);
    const std::vector<std::string> outputs = run(loaded, inputs);
    ASSERT_EQ(outputs.size(), 1u);
    const auto* x = reinterpret_cast<const float*>(inputs[0].bytes.data());
    const auto* y = reinterpret_cast<const float*>(outputs[0].data());
    for (int i = 0; i < 6; ++i) {
      const float t = std::tanh(x[i]);
      EXPECT_NEAR(y[i], (cond ? std::max(t, 0.0f) : -t) * t, 1e-5) << i;
    }
  }
  tsr_model_free(loaded);
  tsr_model_free(compiled);
}

TEST_F(ArtifactTest, EveryTruncationIsAUserError) {
  const std::string bytes = mixed_artifact_bytes();
  ASSERT_GT(bytes.size(), 64u);
  for (size_t length = 0; length < bytes.size(); ++length) {
    SCOPED_TRACE("length " + std::to_string(length));
    const std::string file = write("truncated.tsr", bytes.substr(0, length));
    tsr_model* m = nullptr;
    tsr_status* status = tsr_model_load(file.c_str(), nullptr, &m);
    ASSERT_NE(status, nullptr);
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << tsr_status_message(status);
    // Files long enough to carry the magic are read as artifacts and named in the error.
    if (length >= 8) {
      EXPECT_NE(std::string(tsr_status_message(status)).find("truncated.tsr"), std::string::npos)
          << tsr_status_message(status);
    }
    tsr_status_free(status);
  }
}

TEST_F(ArtifactTest, FlippedBytesAreUserErrors) {
  const std::string bytes = mixed_artifact_bytes();
  for (size_t position : {size_t{9}, size_t{20}, size_t{40}, size_t{63}, size_t{64}, bytes.size() / 2,
                          bytes.size() - 1}) {
    SCOPED_TRACE("byte " + std::to_string(position));
    std::string bad = bytes;
    bad[position] ^= 0x10;
    expect_load_error(write("flipped.tsr", bad), {"flipped.tsr"});
  }
}

TEST_F(ArtifactTest, WrongMagicDirectoryAndMissingFile) {
  std::string bytes = mixed_artifact_bytes();
  bytes[0] = 'X';  // no longer an artifact: read as ONNX, which it is not either
  expect_load_error(write("wrong_magic.tsr", bytes), {"wrong_magic.tsr"});
  fs::create_directories(path("folder.tsr"));
  expect_load_error(path("folder.tsr"), {"folder.tsr"});
  expect_load_error(path("missing.tsr"), {"missing.tsr"});
}

TEST_F(ArtifactTest, OnnxFileNamedTsrIsReadAsOnnx) {
  // The loader goes by the file's first bytes, not its name: an ONNX model
  // saved as .tsr is compiled like any ONNX file (and is no artifact).
  const std::string file = write("really_onnx.tsr", mixed_model().SerializeAsString());
  EXPECT_EQ(tsr_file_is_artifact(file.c_str()), 0);
  tsr_model* m = nullptr;
  tsr_status* status = tsr_model_load(file.c_str(), nullptr, &m);
  EXPECT_EQ(status, nullptr) << tsr_status_message(status);
  if (status) tsr_status_free(status);
  tsr_model_free(m);
}

TEST_F(ArtifactTest, PlanOptionsWithAnArtifactAreUserErrors) {
  mixed_artifact_bytes();
  const std::string file = path("good.tsr");
  tsr_options* backends = nullptr;
  ASSERT_EQ(tsr_options_create(&backends), nullptr);
  ASSERT_EQ(tsr_options_set_backends(backends, "native"), nullptr);
  expect_load_error(file, {"compiled artifact", "good.tsr"}, backends);
  tsr_options_free(backends);
  tsr_options* shape = nullptr;
  ASSERT_EQ(tsr_options_create(&shape), nullptr);
  const int64_t dims[3] = {1, 3, 4};
  ASSERT_EQ(tsr_options_set_input_shape(shape, "x", dims, 3), nullptr);
  expect_load_error(file, {"compiled artifact"}, shape);
  tsr_options_free(shape);
  tsr_options* placement = nullptr;
  ASSERT_EQ(tsr_options_create(&placement), nullptr);
  ASSERT_EQ(tsr_options_add_placement(placement, "op:Relu=native"), nullptr);
  expect_load_error(file, {"compiled artifact"}, placement);
  tsr_options_free(placement);
  // The thread count does apply.
  tsr_options* threads = nullptr;
  ASSERT_EQ(tsr_options_create(&threads), nullptr);
  ASSERT_EQ(tsr_options_set_threads(threads, 2), nullptr);
  tsr_model* m = nullptr;
  tsr_status* status = tsr_model_load(file.c_str(), threads, &m);
  EXPECT_EQ(status, nullptr) << tsr_status_message(status);
  if (status) tsr_status_free(status);
  tsr_model_free(m);
  tsr_options_free(threads);
}

TEST_F(ArtifactTest, SavingWhereNothingCanBeWrittenIsAUserError) {
  tsr_model* m = compile(mixed_model(), "test,native");
  ASSERT_NE(m, nullptr);
  for (const std::string& target : {path("no_such_folder/model.tsr"), dir_.string()}) {
    tsr_status* status = tsr_model_save(m, target.c_str());
    ASSERT_NE(status, nullptr) << target;
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << tsr_status_message(status);
    tsr_status_free(status);
  }
  tsr_model_free(m);
}

}  // namespace
