// The C API's in-memory entry points and sources: models loaded from bytes
// (ONNX and .tsr) and saved to bytes, and tsr_source (an ONNX model imported
// once, compiled per input shape). Results are checked against values
// computed here, and every bad argument is a status, never a crash.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "tessera/tessera.h"

namespace {

namespace fs = std::filesystem;

/// Frees a status at scope exit; .ok() and .message() for assertions.
struct Status {
  tsr_status* s;
  explicit Status(tsr_status* status) : s(status) {}
  ~Status() { tsr_status_free(s); }
  bool ok() const { return s == nullptr; }
  tsr_status_code code() const { return s ? tsr_status_code_of(s) : TSR_OK; }
  std::string message() const { return s ? tsr_status_message(s) : ""; }
};

void add_dims(onnx::ValueInfoProto* v, const std::string& name, std::initializer_list<const char*> symbols,
              std::initializer_list<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = t->mutable_shape();
  auto symbol = symbols.begin();
  for (int64_t d : dims) {
    auto* dim = shape->add_dim();
    if (d >= 0) {
      dim->set_dim_value(d);
    } else if (symbol != symbols.end() && **symbol) {
      dim->set_dim_param(*symbol);
    }
    if (symbol != symbols.end()) ++symbol;
  }
}

void add_initializer(onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, std::vector<float> values) {
  auto* init = g->add_initializer();
  init->set_name(name);
  init->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) init->add_dims(d);
  for (float v : values) init->add_float_data(v);
}

/// x["batch", 2, 3, 3] -> Conv (2->2 channels, 1x1, weights w, bias b) ->
/// BatchNormalization (scale, shift, mean, var) -> y. The compiler folds the
/// normalisation into the convolution's constants, which a source must keep
/// unchanged for its next compile.
onnx::ModelProto conv_bn_model() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  auto* g = model.mutable_graph();
  g->set_name("conv_bn");
  add_dims(g->add_input(), "x", {"batch", "", "", ""}, {-1, 2, 3, 3});
  add_dims(g->add_output(), "y", {"batch", "", "", ""}, {-1, 2, 3, 3});
  add_initializer(g, "w", {2, 2, 1, 1}, {1.0f, 2.0f, -1.0f, 0.5f});
  add_initializer(g, "b", {2}, {0.25f, -0.5f});
  add_initializer(g, "scale", {2}, {2.0f, 3.0f});
  add_initializer(g, "shift", {2}, {1.0f, -1.0f});
  add_initializer(g, "mean", {2}, {0.5f, 0.0f});
  add_initializer(g, "var", {2}, {4.0f, 1.0f});
  auto* conv = g->add_node();
  conv->set_name("conv");
  conv->set_op_type("Conv");
  for (const char* in : {"x", "w", "b"}) conv->add_input(in);
  conv->add_output("c");
  auto* bn = g->add_node();
  bn->set_name("bn");
  bn->set_op_type("BatchNormalization");
  for (const char* in : {"c", "scale", "shift", "mean", "var"}) bn->add_input(in);
  bn->add_output("y");
  auto* eps = bn->add_attribute();
  eps->set_name("epsilon");
  eps->set_type(onnx::AttributeProto::FLOAT);
  eps->set_f(0.0f);
  return model;
}

/// What conv_bn_model computes, written out: per pixel, c = W x + b, then (c - mean) / sqrt(var) * scale + shift.
std::vector<float> conv_bn_expected(const std::vector<float>& x, int64_t batch) {
  const float w[2][2] = {{1.0f, 2.0f}, {-1.0f, 0.5f}}, b[2] = {0.25f, -0.5f};
  const float scale[2] = {2.0f, 3.0f}, shift[2] = {1.0f, -1.0f}, mean[2] = {0.5f, 0.0f}, var[2] = {4.0f, 1.0f};
  std::vector<float> y(x.size());
  for (int64_t n = 0; n < batch; ++n) {
    for (int64_t p = 0; p < 9; ++p) {
      for (int o = 0; o < 2; ++o) {
        float c = b[o];
        for (int i = 0; i < 2; ++i) c += w[o][i] * x[static_cast<size_t>((n * 2 + i) * 9 + p)];
        y[static_cast<size_t>((n * 2 + o) * 9 + p)] = (c - mean[o]) / std::sqrt(var[o]) * scale[o] + shift[o];
      }
    }
  }
  return y;
}

std::vector<float> ramp(size_t count) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = 0.25f * static_cast<float>(i % 11) - 1.0f;
  return v;
}

/// Runs a one-input, one-output float model on x of shape {batch, 2, 3, 3}.
std::vector<float> run_conv_bn(const tsr_model* model, int64_t batch) {
  std::vector<float> x = ramp(static_cast<size_t>(batch * 18)), y(x.size(), -99.0f);
  int64_t shape[4] = {batch, 2, 3, 3};
  DLTensor in{x.data(), {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor out{y.data(), {kDLCPU, 0}, 4, {kDLFloat, 32, 1}, shape, nullptr, 0};
  Status status(tsr_model_run(model, &in, 1, &out, 1));
  EXPECT_TRUE(status.ok()) << status.message();
  return y;
}

void expect_close(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], 1e-5 + 1e-5 * std::fabs(expected[i])) << "element " << i;
  }
}

tsr_options* options_with_batch(int64_t batch) {
  tsr_options* options = nullptr;
  EXPECT_EQ(tsr_options_create(&options), nullptr);
  EXPECT_EQ(tsr_options_set_input_shape(options, "batch", &batch, 1), nullptr);
  return options;
}

class CapiMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_capi_memory_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    bytes_ = conv_bn_model().SerializeAsString();
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// The model compiled for `batch`, from memory.
  tsr_model* compiled(int64_t batch) {
    tsr_options* options = options_with_batch(batch);
    tsr_model* model = nullptr;
    Status status(tsr_model_load_from_memory(bytes_.data(), bytes_.size(), "conv_bn", options, &model));
    tsr_options_free(options);
    EXPECT_TRUE(status.ok()) << status.message();
    return model;
  }

  fs::path dir_;
  std::string bytes_;
};

TEST_F(CapiMemory, OnnxBytesLoadAndRun) {
  tsr_model* model = compiled(2);
  ASSERT_NE(model, nullptr);
  expect_close(run_conv_bn(model, 2), conv_bn_expected(ramp(36), 2));
  tsr_model_free(model);
}

TEST_F(CapiMemory, ArtifactBytesRoundTripAndMatchTheSavedFile) {
  tsr_model* model = compiled(1);
  ASSERT_NE(model, nullptr);
  void* data = nullptr;
  size_t size = 0;
  {
    Status status(tsr_model_save_to_memory(model, &data, &size));
    ASSERT_TRUE(status.ok()) << status.message();
  }
  ASSERT_GT(size, 64u);
  const std::string path = (dir_ / "model.tsr").string();
  ASSERT_EQ(tsr_model_save(model, path.c_str()), nullptr);
  std::ifstream file(path, std::ios::binary);
  const std::string on_disk((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(on_disk.size() == size && std::memcmp(on_disk.data(), data, size) == 0)
      << "tsr_model_save_to_memory differs from the file tsr_model_save writes";

  // Loaded from a copy that is freed right after: the model keeps what it needs.
  std::vector<char> copy(static_cast<char*>(data), static_cast<char*>(data) + size);
  tsr_buffer_free(data);
  tsr_model* loaded = nullptr;
  {
    Status status(tsr_model_load_from_memory(copy.data(), copy.size(), "copy", nullptr, &loaded));
    ASSERT_TRUE(status.ok()) << status.message();
  }
  std::fill(copy.begin(), copy.end(), 0);
  copy.clear();
  copy.shrink_to_fit();
  expect_close(run_conv_bn(loaded, 1), conv_bn_expected(ramp(18), 1));
  tsr_model_free(loaded);
  tsr_model_free(model);
}

TEST_F(CapiMemory, BadBytesAreUserErrors) {
  tsr_model* model = compiled(1);
  ASSERT_NE(model, nullptr);
  void* data = nullptr;
  size_t size = 0;
  ASSERT_EQ(tsr_model_save_to_memory(model, &data, &size), nullptr);
  const std::string artifact(static_cast<char*>(data), size);
  tsr_buffer_free(data);
  tsr_model_free(model);

  auto expect_error = [](const std::string& bytes, const char* part) {
    tsr_model* m = reinterpret_cast<tsr_model*>(1);
    Status status(tsr_model_load_from_memory(bytes.data(), bytes.size(), "bad", nullptr, &m));
    ASSERT_FALSE(status.ok()) << "loading succeeded: " << part;
    EXPECT_EQ(m, nullptr);
    EXPECT_EQ(status.code(), TSR_INVALID_ARGUMENT) << status.message();
    EXPECT_NE(status.message().find(part), std::string::npos) << status.message();
  };
  for (size_t cut : {size_t{8}, size_t{63}, size_t{64}, artifact.size() / 2, artifact.size() - 1}) {
    expect_error(artifact.substr(0, cut), "artifact 'bad'");
  }
  std::string flipped = artifact;
  flipped[flipped.size() - 7] ^= 0x5a;
  expect_error(flipped, "checksum");
  expect_error("", "");
  expect_error(std::string("\x08\x07garbage", 9), "");

  // External data has no folder to come from.
  onnx::ModelProto external = conv_bn_model();
  auto* w = external.mutable_graph()->mutable_initializer(0);
  w->clear_float_data();
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = w->add_external_data();
  entry->set_key("location");
  entry->set_value("w.bin");
  expect_error(external.SerializeAsString(), "no folder");

  tsr_model* m = nullptr;
  Status null_data(tsr_model_load_from_memory(nullptr, 10, "x", nullptr, &m));
  EXPECT_EQ(null_data.code(), TSR_INVALID_ARGUMENT);
  Status null_out(tsr_model_load_from_memory(artifact.data(), artifact.size(), "x", nullptr, nullptr));
  EXPECT_EQ(null_out.code(), TSR_INVALID_ARGUMENT);
  Status null_model(tsr_model_save_to_memory(nullptr, &data, &size));
  EXPECT_EQ(null_model.code(), TSR_INVALID_ARGUMENT);
  tsr_buffer_free(nullptr);
}

TEST_F(CapiMemory, SourceDescribesOpenDimsAndCompilesPerShape) {
  tsr_source* source = nullptr;
  {
    Status status(tsr_source_load_from_memory(bytes_.data(), bytes_.size(), "conv_bn", nullptr, &source));
    ASSERT_TRUE(status.ok()) << status.message();
  }
  ASSERT_EQ(tsr_source_input_count(source), 1u);
  ASSERT_EQ(tsr_source_output_count(source), 1u);
  tsr_value_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(tsr_source_input_info(source, 0, &info), nullptr);
  EXPECT_STREQ(info.name, "x");
  ASSERT_EQ(info.ndim, 4);
  EXPECT_EQ(info.shape[0], -1);
  EXPECT_EQ(info.shape[1], 2);
  ASSERT_NE(info.dim_names, nullptr);
  EXPECT_STREQ(info.dim_names[0], "batch");
  EXPECT_STREQ(info.dim_names[1], "");
  ASSERT_EQ(tsr_source_output_info(source, 0, &info), nullptr);
  EXPECT_STREQ(info.name, "y");

  // Compiled for several batch sizes, twice each: folding the normalisation
  // into one compile's weights must not change the source's.
  for (int64_t batch : {1, 3, 1, 3}) {
    tsr_options* options = options_with_batch(batch);
    tsr_model* model = nullptr;
    Status status(tsr_source_compile(source, options, &model));
    tsr_options_free(options);
    ASSERT_TRUE(status.ok()) << status.message();
    SCOPED_TRACE("batch " + std::to_string(batch));
    expect_close(run_conv_bn(model, batch), conv_bn_expected(ramp(static_cast<size_t>(batch * 18)), batch));
    // The compiled model names its dims too.
    ASSERT_EQ(tsr_model_input_info(model, 0, &info), nullptr);
    EXPECT_EQ(info.shape[0], batch);
    EXPECT_STREQ(info.dim_names[0], "batch");
    tsr_model_free(model);
  }

  // Unbound, the dim stays open: one compiled model runs every batch.
  tsr_model* model = nullptr;
  Status unbound(tsr_source_compile(source, nullptr, &model));
  ASSERT_TRUE(unbound.ok()) << unbound.message();
  ASSERT_EQ(tsr_model_input_info(model, 0, &info), nullptr);
  EXPECT_EQ(info.shape[0], -1);
  EXPECT_STREQ(info.dim_names[0], "batch");
  for (int64_t batch : {3, 1, 2}) {
    SCOPED_TRACE("open batch " + std::to_string(batch));
    expect_close(run_conv_bn(model, batch), conv_bn_expected(ramp(static_cast<size_t>(batch * 18)), batch));
  }
  tsr_model_free(model);
  tsr_source_free(source);
}

TEST_F(CapiMemory, SourceCompilesFromSeveralThreadsAndOutlivesNothing) {
  const std::string path = (dir_ / "conv_bn.onnx").string();
  std::ofstream(path, std::ios::binary) << bytes_;
  tsr_source* source = nullptr;
  ASSERT_EQ(tsr_source_load(path.c_str(), nullptr, &source), nullptr);
  std::vector<tsr_model*> models(4, nullptr);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < models.size(); ++t) {
    threads.emplace_back([&, t] {
      tsr_options* options = options_with_batch(static_cast<int64_t>(t + 1));
      tsr_status* status = tsr_source_compile(source, options, &models[t]);
      tsr_options_free(options);
      tsr_status_free(status);
    });
  }
  for (std::thread& thread : threads) thread.join();
  tsr_source_free(source);  // the models do not need it
  for (size_t t = 0; t < models.size(); ++t) {
    ASSERT_NE(models[t], nullptr) << "compile " << t << " failed";
    const int64_t batch = static_cast<int64_t>(t + 1);
    expect_close(run_conv_bn(models[t], batch), conv_bn_expected(ramp(static_cast<size_t>(batch * 18)), batch));
    tsr_model_free(models[t]);
  }
}

TEST_F(CapiMemory, SourceErrors) {
  tsr_source* source = nullptr;
  Status missing(tsr_source_load((dir_ / "absent.onnx").c_str(), nullptr, &source));
  EXPECT_EQ(missing.code(), TSR_INVALID_ARGUMENT);
  EXPECT_EQ(source, nullptr);
  Status directory(tsr_source_load(dir_.c_str(), nullptr, &source));
  EXPECT_NE(directory.message().find("directory"), std::string::npos) << directory.message();

  // A compiled artifact is not a source.
  tsr_model* model = compiled(1);
  ASSERT_NE(model, nullptr);
  void* data = nullptr;
  size_t size = 0;
  ASSERT_EQ(tsr_model_save_to_memory(model, &data, &size), nullptr);
  Status artifact(tsr_source_load_from_memory(data, size, "m.tsr", nullptr, &source));
  EXPECT_NE(artifact.message().find("compiled artifact"), std::string::npos) << artifact.message();
  const std::string path = (dir_ / "m.tsr").string();
  ASSERT_EQ(tsr_model_save(model, path.c_str()), nullptr);
  Status artifact_file(tsr_source_load(path.c_str(), nullptr, &source));
  EXPECT_NE(artifact_file.message().find("compiled artifact"), std::string::npos) << artifact_file.message();
  tsr_buffer_free(data);
  tsr_model_free(model);

  Status garbage(tsr_source_load_from_memory("\x01\x02\x03", 3, "g", nullptr, &source));
  EXPECT_EQ(garbage.code(), TSR_INVALID_ARGUMENT);
  EXPECT_EQ(source, nullptr);
  Status null_source(tsr_source_compile(nullptr, nullptr, &model));
  EXPECT_EQ(null_source.code(), TSR_INVALID_ARGUMENT);
  EXPECT_EQ(tsr_source_input_count(nullptr), 0u);
  tsr_value_info info{};
  info.struct_size = sizeof(info);
  Status null_info(tsr_source_input_info(nullptr, 0, &info));
  EXPECT_EQ(null_info.code(), TSR_INVALID_ARGUMENT);
  tsr_source_free(nullptr);
}

TEST_F(CapiMemory, ValueInfoFromCallersBuiltBeforeDimNames) {
  tsr_model* model = compiled(2);
  ASSERT_NE(model, nullptr);
  tsr_value_info info{};
  const char* const sentinel[] = {"untouched"};
  info.dim_names = sentinel;
  info.struct_size = offsetof(tsr_value_info, dim_names);  // the struct as it was
  ASSERT_EQ(tsr_model_input_info(model, 0, &info), nullptr);
  EXPECT_EQ(info.ndim, 4);
  EXPECT_EQ(info.dim_names, sentinel);
  info.struct_size = offsetof(tsr_value_info, dim_names) - 1;
  Status small(tsr_model_input_info(model, 0, &info));
  EXPECT_EQ(small.code(), TSR_INVALID_ARGUMENT);
  tsr_model_free(model);
}

}  // namespace
