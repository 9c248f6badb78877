// Bad input is a test subject: every malformed model, unknown op, bad dtype,
// missing initializer, inconsistent shape or bad run-time input must give a
// clear user error (naming node, op and value) through the C API, never an
// abort. Models are built here with the ONNX protobuf API.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace {

namespace fs = std::filesystem;

class ErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_error_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string write_model(const onnx::ModelProto& model, const std::string& name = "model.onnx") {
    return write(name, model.SerializeAsString());
  }

  /// Loads `path`; expects failure with `code` and a message containing each of `parts`.
  void expect_load_error(const std::string& path, tsr_status_code code, std::initializer_list<const char*> parts) {
    tsr_model* model = nullptr;
    tsr_status* status = tsr_model_load(path.c_str(), nullptr, &model);
    ASSERT_NE(status, nullptr) << "loading succeeded but should not";
    EXPECT_EQ(model, nullptr);
    EXPECT_EQ(tsr_status_code_of(status), code) << tsr_status_message(status);
    std::string message = tsr_status_message(status);
    for (const char* part : parts) EXPECT_NE(message.find(part), std::string::npos) << "message: " << message;
    tsr_status_free(status);
  }

  fs::path dir_;
};

void set_type(onnx::ValueInfoProto* v, const std::string& name, int elem_type, std::initializer_list<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

/// x[2,3] -> op -> y
onnx::ModelProto unary_model(const std::string& op, int opset = 13) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(opset);
  auto* g = model.mutable_graph();
  g->set_name("g");
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 3});
  auto* n = g->add_node();
  n->set_name("the_node");
  n->set_op_type(op);
  n->add_input("x");
  n->add_output("y");
  return model;
}

/// unary_model("Add") with w[2,3] as external data at `location`.
onnx::ModelProto external_model(const std::string& location) {
  onnx::ModelProto model = unary_model("Add");
  auto* g = model.mutable_graph();
  auto* init = g->add_initializer();
  init->set_name("w");
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(2);
  init->add_dims(3);
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = init->add_external_data();
  entry->set_key("location");
  entry->set_value(location);
  g->mutable_node(0)->add_input("w");
  return model;
}

TEST_F(ErrorTest, MissingFile) {
  expect_load_error((dir_ / "nope.onnx").string(), TSR_INVALID_ARGUMENT, {"cannot open", "nope.onnx"});
}

TEST_F(ErrorTest, GarbageBytes) {
  expect_load_error(write("garbage.onnx", std::string("\xff\xfe\x00\x13garbage\x01\x02", 14)), TSR_INVALID_ARGUMENT,
                    {"garbage.onnx"});
}

TEST_F(ErrorTest, EmptyFile) {
  expect_load_error(write("empty.onnx", ""), TSR_INVALID_ARGUMENT, {"no graph"});
}

TEST_F(ErrorTest, EveryTruncationIsAUserError) {
  std::string bytes = unary_model("Relu").SerializeAsString();
  for (size_t len = 0; len < bytes.size(); ++len) {
    std::string path = write("truncated.onnx", bytes.substr(0, len));
    tsr_model* model = nullptr;
    tsr_status* status = tsr_model_load(path.c_str(), nullptr, &model);
    if (status) {
      EXPECT_NE(tsr_status_code_of(status), TSR_INTERNAL) << "length " << len << ": " << tsr_status_message(status);
      tsr_status_free(status);
    }
    tsr_model_free(model);
  }
}

TEST_F(ErrorTest, UnknownOpNamesNodeOpAndOpset) {
  expect_load_error(write_model(unary_model("FancyNewOp")), TSR_UNSUPPORTED, {"the_node", "FancyNewOp", "opset 13"});
}

TEST_F(ErrorTest, OpsetTooNew) {
  expect_load_error(write_model(unary_model("Relu", 99)), TSR_UNSUPPORTED, {"opset 99"});
}

TEST_F(ErrorTest, MissingInitializerNamesTheValue) {
  onnx::ModelProto model = unary_model("Add");
  model.mutable_graph()->mutable_node(0)->add_input("bias_that_does_not_exist");
  expect_load_error(write_model(model), TSR_INVALID_ARGUMENT, {"the_node", "Add", "bias_that_does_not_exist"});
}

TEST_F(ErrorTest, UnsupportedDtype) {
  onnx::ModelProto model = unary_model("Relu");
  model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::STRING);
  expect_load_error(write_model(model), TSR_UNSUPPORTED, {"'x'", "string"});
}

TEST_F(ErrorTest, InconsistentShapes) {
  onnx::ModelProto model = unary_model("Add");
  auto* g = model.mutable_graph();
  set_type(g->add_input(), "z", onnx::TensorProto::FLOAT, {4, 5});
  g->mutable_node(0)->add_input("z");
  expect_load_error(write_model(model), TSR_INVALID_ARGUMENT, {"the_node", "Add", "2x3", "4x5"});
}

TEST_F(ErrorTest, RawDataOfWrongSize) {
  onnx::ModelProto model = unary_model("Add");
  auto* g = model.mutable_graph();
  auto* init = g->add_initializer();
  init->set_name("w");
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(2);
  init->add_dims(3);
  init->set_raw_data(std::string(7, '\0'));
  g->mutable_node(0)->add_input("w");
  expect_load_error(write_model(model), TSR_INVALID_ARGUMENT, {"'w'", "7 bytes"});
}

TEST_F(ErrorTest, HugeInitializerShapeIsRejectedBeforeAllocating) {
  onnx::ModelProto model = unary_model("Add");
  auto* g = model.mutable_graph();
  auto* init = g->add_initializer();
  init->set_name("w");
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(1 << 19);
  init->add_dims(1 << 19);
  init->set_raw_data(std::string(8, '\0'));
  g->mutable_node(0)->add_input("w");
  expect_load_error(write_model(model), TSR_INVALID_ARGUMENT, {"'w'", "8 bytes"});
  init->clear_raw_data();
  init->add_float_data(1.0f);
  expect_load_error(write_model(model), TSR_INVALID_ARGUMENT, {"'w'", "1 values"});
}

TEST_F(ErrorTest, HugeShapesAreUserErrors) {
  onnx::ModelProto model = unary_model("Relu");
  auto* dims = model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  dims->mutable_dim(0)->set_dim_value(int64_t{1} << 40);
  dims->mutable_dim(1)->set_dim_value(int64_t{1} << 40);
  expect_load_error(write_model(model), TSR_INVALID_ARGUMENT, {"'x'", "too large"});
  // An op whose output would be huge: Expand to a giant shape given as a constant.
  onnx::ModelProto expand = unary_model("Expand");
  auto* shape = expand.mutable_graph()->add_initializer();
  shape->set_name("shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(4);
  for (int64_t d : {int64_t{1} << 30, int64_t{1} << 20, int64_t{1}, int64_t{1}}) shape->add_int64_data(d);
  expand.mutable_graph()->mutable_node(0)->add_input("shape");
  expect_load_error(write_model(expand), TSR_INVALID_ARGUMENT, {"the_node", "Expand", "too large"});
}

TEST_F(ErrorTest, ExternalDataCannotLeaveTheModelFolder) {
  expect_load_error(write_model(external_model("../../etc/passwd")), TSR_INVALID_ARGUMENT,
                    {"'w'", "leaves the model's folder"});
}

TEST_F(ErrorTest, ExternalDataOutOfRange) {
  write("weights.bin", std::string(16, '\0'));
  onnx::ModelProto model = external_model("weights.bin");
  auto* off = model.mutable_graph()->mutable_initializer(0)->add_external_data();
  off->set_key("offset");
  off->set_value("8");
  expect_load_error(write_model(model), TSR_INVALID_ARGUMENT, {"'w'", "weights.bin"});
}

TEST_F(ErrorTest, ExternalDataLoads) {
  float values[6] = {1, 2, 3, 4, 5, 6};
  write("weights.bin", std::string("pad!") + std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  onnx::ModelProto model = unary_model("Add");
  auto* g = model.mutable_graph();
  auto* init = g->add_initializer();
  init->set_name("w");
  init->set_data_type(onnx::TensorProto::FLOAT);
  init->add_dims(2);
  init->add_dims(3);
  init->set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] : {std::pair{"location", "weights.bin"}, std::pair{"offset", "4"}, std::pair{"length", "24"}}) {
    auto* e = init->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  g->mutable_node(0)->add_input("w");
  tsr_model* m = nullptr;
  tsr_status* status = tsr_model_load(write_model(model).c_str(), nullptr, &m);
  ASSERT_EQ(status, nullptr) << tsr_status_message(status);
  float x[6] = {0, 0, 0, 1, 1, 1}, y[6] = {};
  int64_t shape[2] = {2, 3};
  DLTensor in{x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor out{y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  ASSERT_EQ(tsr_model_run(m, &in, 1, &out, 1), nullptr);
  EXPECT_EQ(y[0], 1);
  EXPECT_EQ(y[5], 7);
  tsr_model_free(m);
}

TEST_F(ErrorTest, RunTimeInputErrors) {
  tsr_model* m = nullptr;
  ASSERT_EQ(tsr_model_load(write_model(unary_model("Relu")).c_str(), nullptr, &m), nullptr);
  float x[12] = {}, y[6] = {};
  int64_t good[2] = {2, 3}, bad[2] = {3, 4};
  DLTensor out{y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, good, nullptr, 0};
  struct Case {
    DLTensor input;
    const char* expect;
  } cases[] = {
      {{x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, bad, nullptr, 0}, "input 'x': expected float32[2x3], got float32[3x4]"},
      {{x, {kDLCPU, 0}, 2, {kDLInt, 64, 1}, good, nullptr, 0}, "input 'x': expected float32[2x3], got int64[2x3]"},
      {{x, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, good, nullptr, 0}, "only CPU tensors"},
      {{x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, nullptr, nullptr, 0}, "shape is NULL"},
  };
  for (const Case& c : cases) {
    tsr_status* status = tsr_model_run(m, &c.input, 1, &out, 1);
    ASSERT_NE(status, nullptr);
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tsr_status_message(status)).find(c.expect), std::string::npos) << tsr_status_message(status);
    tsr_status_free(status);
  }
  DLTensor good_in{x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, good, nullptr, 0};
  tsr_status* status = tsr_model_run(m, &good_in, 2, &out, 1);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << tsr_status_message(status);
  EXPECT_NE(std::string(tsr_status_message(status)).find("1 inputs but 2"), std::string::npos);
  tsr_status_free(status);
  DLTensor bad_out{y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, bad, nullptr, 0};
  status = tsr_model_run(m, &good_in, 1, &bad_out, 1);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << tsr_status_message(status);
  EXPECT_NE(std::string(tsr_status_message(status)).find("output 'y'"), std::string::npos);
  tsr_status_free(status);
  EXPECT_EQ(tsr_model_run(m, &good_in, 1, &out, 1), nullptr);
  tsr_model_free(m);
}

// A graph with no node: an input wired straight to an output, and an
// initializer as a second output. Both the caller-buffer and the allocating
// run must work.
TEST_F(ErrorTest, GraphWithoutNodesRuns) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  auto* g = model.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  set_type(g->add_output(), "x", onnx::TensorProto::FLOAT, {2, 3});
  auto* c = g->add_initializer();
  c->set_name("c");
  c->set_data_type(onnx::TensorProto::INT64);
  c->add_dims(2);
  c->add_int64_data(7);
  c->add_int64_data(-1);
  set_type(g->add_output(), "c", onnx::TensorProto::INT64, {2});
  tsr_model* m = nullptr;
  tsr_status* status = tsr_model_load(write_model(model).c_str(), nullptr, &m);
  ASSERT_EQ(status, nullptr) << tsr_status_message(status);
  EXPECT_EQ(tsr_model_node_count(m), 0u);
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {};
  int64_t y_c[2] = {};
  int64_t shape[2] = {2, 3}, c_shape[1] = {2};
  DLTensor in{x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor outs[2] = {{y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0},
                      {y_c, {kDLCPU, 0}, 1, {kDLInt, 64, 1}, c_shape, nullptr, 0}};
  ASSERT_EQ(tsr_model_run(m, &in, 1, outs, 2), nullptr);
  EXPECT_EQ(y[5], 6.0f);
  EXPECT_EQ(y_c[0], 7);
  EXPECT_EQ(y_c[1], -1);
  DLManagedTensor* allocated[2] = {nullptr, nullptr};
  ASSERT_EQ(tsr_model_run_alloc(m, &in, 1, allocated, 2), nullptr);
  EXPECT_NE(allocated[0]->dl_tensor.data, static_cast<void*>(x));  // a copy the caller owns
  EXPECT_EQ(static_cast<float*>(allocated[0]->dl_tensor.data)[4], 5.0f);
  EXPECT_EQ(static_cast<int64_t*>(allocated[1]->dl_tensor.data)[0], 7);
  for (DLManagedTensor* t : allocated) t->deleter(t);
  tsr_model_free(m);
}

TEST_F(ErrorTest, NullArgumentsAreErrorsNotCrashes) {
  tsr_model* m = nullptr;
  tsr_status* status = tsr_model_load(nullptr, nullptr, &m);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT);
  tsr_status_free(status);
  status = tsr_model_run(nullptr, nullptr, 0, nullptr, 0);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << tsr_status_message(status);
  tsr_status_free(status);
}

TEST_F(ErrorTest, CycleOrUnproducedValue) {
  onnx::ModelProto model = unary_model("Relu");
  auto* g = model.mutable_graph();
  g->mutable_node(0)->set_input(0, "loop_b");
  auto* n2 = g->add_node();
  n2->set_name("second");
  n2->set_op_type("Relu");
  n2->add_input("y");
  n2->add_output("loop_b");
  expect_load_error(write_model(model), TSR_INVALID_ARGUMENT, {"loop_b", "cycle"});
}

TEST_F(ErrorTest, UnboundSymbolicDimension) {
  onnx::ModelProto model = unary_model("Relu");
  auto* dim = model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0);
  dim->set_dim_param("batch");
  expect_load_error(write_model(model), TSR_INVALID_ARGUMENT, {"'x'", "batch", "--input-shape"});
  // Binding it by name works.
  tsr_options* options = nullptr;
  ASSERT_EQ(tsr_options_create(&options), nullptr);
  int64_t four = 4;
  ASSERT_EQ(tsr_options_set_input_shape(options, "batch", &four, 1), nullptr);
  tsr_model* m = nullptr;
  tsr_status* status = tsr_model_load(write_model(model).c_str(), options, &m);
  EXPECT_EQ(status, nullptr) << tsr_status_message(status);
  tsr_value_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(tsr_model_input_info(m, 0, &info), nullptr);
  EXPECT_EQ(info.shape[0], 4);
  tsr_model_free(m);
  // Binding the input by name as well, to a shape that disagrees with 'batch', is an error.
  int64_t three_by_three[2] = {3, 3};
  ASSERT_EQ(tsr_options_set_input_shape(options, "x", three_by_three, 2), nullptr);
  m = nullptr;
  status = tsr_model_load(write_model(model).c_str(), options, &m);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(m, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << tsr_status_message(status);
  EXPECT_NE(std::string(tsr_status_message(status)).find("('batch') is bound to 4"), std::string::npos)
      << tsr_status_message(status);
  tsr_status_free(status);
  tsr_options_free(options);
}

// --- Caller tensors of tsr_model_run: every field is checked before anything runs. ---

/// Runs `m` and expects a user error whose message has `part`.
void expect_run_error(const tsr_model* m, const DLTensor* in, size_t n_in, DLTensor* out, size_t n_out, const char* part) {
  tsr_status* status = tsr_model_run(m, in, n_in, out, n_out);
  ASSERT_NE(status, nullptr) << "the run succeeded; expected: " << part;
  EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << tsr_status_message(status);
  EXPECT_NE(std::string(tsr_status_message(status)).find(part), std::string::npos) << tsr_status_message(status);
  tsr_status_free(status);
}

// Outputs that are a graph input or a constant are copied out after the run:
// a NULL data pointer there used to crash, and one for a computed output made
// the run write nothing and succeed.
TEST_F(ErrorTest, NullOutputDataIsAnErrorForEveryKindOfOutput) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  auto* g = model.mutable_graph();
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  set_type(g->add_output(), "x", onnx::TensorProto::FLOAT, {2, 3});  // a graph input
  auto* c = g->add_initializer();
  c->set_name("c");
  c->set_data_type(onnx::TensorProto::FLOAT);
  c->add_dims(2);
  c->add_float_data(7);
  c->add_float_data(8);
  set_type(g->add_output(), "c", onnx::TensorProto::FLOAT, {2});  // a constant
  auto* n = g->add_node();
  n->set_name("neg");
  n->set_op_type("Neg");
  n->add_input("x");
  n->add_output("y");
  set_type(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 3});  // computed
  tsr_model* m = nullptr;
  tsr_status* status = tsr_model_load(write_model(model).c_str(), nullptr, &m);
  ASSERT_EQ(status, nullptr) << tsr_status_message(status);
  float x[6] = {1, 2, 3, 4, 5, 6}, x_out[6] = {}, c_out[2] = {}, y_out[6] = {};
  int64_t shape[2] = {2, 3}, c_shape[1] = {2};
  DLTensor in{x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor outs[3] = {{x_out, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0},
                      {c_out, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, c_shape, nullptr, 0},
                      {y_out, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0}};
  const char* names[3] = {"output 'x': data is NULL", "output 'c': data is NULL", "output 'y': data is NULL"};
  for (int i = 0; i < 3; ++i) {
    DLTensor saved = outs[i];
    outs[i].data = nullptr;
    expect_run_error(m, &in, 1, outs, 3, names[i]);
    outs[i] = saved;
  }
  DLTensor null_in = in;
  null_in.data = nullptr;
  expect_run_error(m, &null_in, 1, outs, 3, "input 'x': data is NULL");
  // Nothing was written by the failed runs; the good one writes all three (y = -x).
  EXPECT_EQ(y_out[0], 0.0f);
  ASSERT_EQ(tsr_model_run(m, &in, 1, outs, 3), nullptr);
  EXPECT_EQ(x_out[5], 6.0f);
  EXPECT_EQ(c_out[1], 8.0f);
  EXPECT_EQ(y_out[4], -5.0f);
  tsr_model_free(m);
}

TEST_F(ErrorTest, EveryFieldOfACallerTensorIsChecked) {
  tsr_model* m = nullptr;
  ASSERT_EQ(tsr_model_load(write_model(unary_model("Relu")).c_str(), nullptr, &m), nullptr);
  alignas(16) float x[8] = {-1, 2, -3, 4, -5, 6}, y[8] = {};
  int64_t shape[2] = {2, 3}, shape3[3] = {1, 2, 3}, transposed[2] = {1, 2}, negative[2] = {-2, -3};
  DLTensor in{x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor out{y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  struct Case {
    const char* what;
    DLTensor tensor;
    const char* expect;
  } cases[] = {
      {"dtype", {y, {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, nullptr, 0}, "got int32[2x3]"},
      {"lanes", {y, {kDLCPU, 0}, 2, {kDLFloat, 32, 4}, shape, nullptr, 0}, "lanes"},
      {"rank", {y, {kDLCPU, 0}, 3, {kDLFloat, 32, 1}, shape3, nullptr, 0}, "got a tensor of 3 dimensions"},
      {"huge rank, NULL shape", {y, {kDLCPU, 0}, 1 << 30, {kDLFloat, 32, 1}, nullptr, nullptr, 0}, "1073741824 dimensions"},
      {"negative rank", {y, {kDLCPU, 0}, -1, {kDLFloat, 32, 1}, shape, nullptr, 0}, "-1 dimensions"},
      {"negative dims", {y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, negative, nullptr, 0}, "dimension 0 is -2"},
      {"device", {y, {kDLCUDA, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0}, "only CPU tensors"},
      {"strides", {y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, transposed, 0}, "contiguous row-major"},
      {"alignment", {y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 2}, "not aligned to its 4-byte elements"},
  };
  for (Case& c : cases) {
    SCOPED_TRACE(c.what);
    expect_run_error(m, &in, 1, &c.tensor, 1, "output 'y'");
    expect_run_error(m, &in, 1, &c.tensor, 1, c.expect);
    c.tensor.data = x;  // the same checks hold for inputs
    expect_run_error(m, &c.tensor, 1, &out, 1, "input 'x'");
    expect_run_error(m, &c.tensor, 1, &out, 1, c.expect);
  }
  for (float v : y) EXPECT_EQ(v, 0.0f);  // no failed run wrote anything
  // An output over its own input, or over part of it, would be read after being written.
  DLTensor over_input{x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  expect_run_error(m, &in, 1, &over_input, 1, "output 'y': its buffer overlaps input 'x'");
  DLTensor partly_over_input{x + 4, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  expect_run_error(m, &in, 1, &partly_over_input, 1, "overlaps input 'x'");
  // Compact strides, and a byte_offset that keeps the alignment, are fine.
  int64_t compact[2] = {3, 1};
  DLTensor strided{y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, compact, 8};
  ASSERT_EQ(tsr_model_run(m, &in, 1, &strided, 1), nullptr);
  const float want[6] = {0, 2, 0, 4, 0, 6};
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[2 + i], want[i]) << i;
  tsr_model_free(m);
}

TEST_F(ErrorTest, TwoOutputsInOneBufferAreAnError) {
  onnx::ModelProto model = unary_model("Relu");
  auto* g = model.mutable_graph();
  auto* n = g->add_node();
  n->set_name("second");
  n->set_op_type("Neg");
  n->add_input("x");
  n->add_output("z");
  set_type(g->add_output(), "z", onnx::TensorProto::FLOAT, {2, 3});
  tsr_model* m = nullptr;
  ASSERT_EQ(tsr_model_load(write_model(model).c_str(), nullptr, &m), nullptr);
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {};
  int64_t shape[2] = {2, 3};
  DLTensor in{x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  DLTensor outs[2] = {{y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0},
                      {y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0}};
  expect_run_error(m, &in, 1, outs, 2, "output 'z': its buffer overlaps output 'y'");
  // A failed allocating run leaves no pointer behind to free.
  DLManagedTensor* allocated[2] = {reinterpret_cast<DLManagedTensor*>(&y[0]), reinterpret_cast<DLManagedTensor*>(&y[1])};
  tsr_status* status = tsr_model_run_alloc(m, &in, 2, allocated, 2);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << tsr_status_message(status);
  tsr_status_free(status);
  EXPECT_EQ(allocated[0], nullptr);
  EXPECT_EQ(allocated[1], nullptr);
  tsr_model_free(m);
}

TEST_F(ErrorTest, ReportProfileArraysMustFitTheModel) {
  tsr_model* m = nullptr;
  ASSERT_EQ(tsr_model_load(write_model(unary_model("Relu")).c_str(), nullptr, &m), nullptr);
  double node_ms[1] = {1.5};  // the model has 1 node; claiming 1000 would read past the array
  tsr_run_profile profile{};
  profile.struct_size = sizeof(profile);
  profile.node_milliseconds = node_ms;
  profile.num_nodes = 1000;
  char* text = nullptr;
  tsr_status* status = tsr_model_report(m, "json", "m", &profile, &text);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(text, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << tsr_status_message(status);
  EXPECT_NE(std::string(tsr_status_message(status)).find("1 nodes but room for 1000"), std::string::npos)
      << tsr_status_message(status);
  tsr_status_free(status);
  profile.num_nodes = 1;
  ASSERT_EQ(tsr_model_report(m, "json", "m", &profile, &text), nullptr);
  EXPECT_NE(std::string(text).find("1.5"), std::string::npos) << text;
  tsr_string_free(text);
  tsr_model_free(m);
}

// --- Options: shapes are sizes; a data shape only binds inputs the model has. ---

TEST_F(ErrorTest, NegativeInputShapesAreRefusedWhenSet) {
  tsr_options* options = nullptr;
  ASSERT_EQ(tsr_options_create(&options), nullptr);
  int64_t dims[2] = {2, -3};
  for (auto set : {tsr_options_set_input_shape, tsr_options_set_input_data_shape}) {
    tsr_status* status = set(options, "x", dims, 2);
    ASSERT_NE(status, nullptr);
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tsr_status_message(status)).find("'x' has a negative dimension (-3"), std::string::npos)
        << tsr_status_message(status);
    tsr_status_free(status);
    status = set(options, "batch", dims + 1, 1);  // a symbolic dimension
    ASSERT_NE(status, nullptr);
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << tsr_status_message(status);
    tsr_status_free(status);
  }
  tsr_options_free(options);
}

TEST_F(ErrorTest, DataShapesBindOnlyTheModelsInputs) {
  onnx::ModelProto model = unary_model("Relu");
  auto* dim = model.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0);
  dim->set_dim_param("batch");
  model.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  tsr_options* options = nullptr;
  ASSERT_EQ(tsr_options_create(&options), nullptr);
  int64_t x_shape[2] = {5, 3}, one = 1;
  ASSERT_EQ(tsr_options_set_input_data_shape(options, "x", x_shape, 2), nullptr);
  ASSERT_EQ(tsr_options_set_input_data_shape(options, "not_an_input", x_shape, 2), nullptr);
  ASSERT_EQ(tsr_options_set_input_data_shape(options, "batch", &one, 1), nullptr);  // never a symbol
  tsr_model* m = nullptr;
  tsr_status* status = tsr_model_load(write_model(model).c_str(), options, &m);
  ASSERT_EQ(status, nullptr) << tsr_status_message(status);
  tsr_value_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(tsr_model_input_info(m, 0, &info), nullptr);
  ASSERT_EQ(info.ndim, 2);
  EXPECT_EQ(info.shape[0], 5);
  tsr_model_free(m);
  // A shape set by name wins over a data shape.
  int64_t x_other[2] = {7, 3};
  ASSERT_EQ(tsr_options_set_input_shape(options, "x", x_other, 2), nullptr);
  ASSERT_EQ(tsr_model_load(write_model(model).c_str(), options, &m), nullptr);
  ASSERT_EQ(tsr_model_input_info(m, 0, &info), nullptr);
  EXPECT_EQ(info.shape[0], 7);
  tsr_model_free(m);
  tsr_options_free(options);
}

// --- Files read: the model and its external data. ---

TEST_F(ErrorTest, ModelPathMustBeARegularFile) {
  fs::create_directories(dir_ / "folder.onnx");
  expect_load_error((dir_ / "folder.onnx").string(), TSR_INVALID_ARGUMENT, {"folder.onnx", "is a directory"});
  EXPECT_EQ(tsr_file_is_artifact((dir_ / "folder.onnx").c_str()), 0);
  // A FIFO with no writer: opening it for reading would block forever.
  const std::string fifo = (dir_ / "pipe.onnx").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(tsr_file_is_artifact(fifo.c_str()), 0);
  expect_load_error(fifo, TSR_INVALID_ARGUMENT, {"pipe.onnx", "is a FIFO"});
}

TEST_F(ErrorTest, ExternalDataIsOnlyRegularFilesInsideTheFolder) {
  // A file outside the model's folder, of the right size, that a link could smuggle in.
  const fs::path model_dir = dir_ / "model";
  const fs::path outside = dir_ / "secret.bin";
  fs::create_directories(model_dir / "data");
  std::ofstream(outside, std::ios::binary) << std::string(24, '\x01');
  std::ofstream(model_dir / "data" / "w.bin", std::ios::binary) << std::string(24, '\0');
  fs::create_symlink(outside, model_dir / "link.bin");
  fs::create_directory_symlink(model_dir / "data", model_dir / "linked_dir");
  fs::create_directories(model_dir / "folder.bin");
  ASSERT_EQ(::mkfifo((model_dir / "pipe.bin").c_str(), 0600), 0);
  struct Case {
    std::string location;
    std::vector<const char*> expect;
  } cases[] = {
      {"link.bin", {"'w'", "link.bin", "symbolic link"}},
      {"linked_dir/w.bin", {"'w'", "linked_dir", "symbolic link"}},
      {"./link.bin", {"symbolic link"}},
      {"pipe.bin", {"'w'", "pipe.bin", "is a FIFO"}},
      {"folder.bin", {"'w'", "folder.bin", "is a folder"}},
      {"data/", {"does not name a file"}},
      {"data/../link.bin", {"leaves the model's folder"}},
      {outside.string(), {"must be relative"}},
      {std::string("data/w.bin\0../x", 15), {"NUL"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.location);
    const std::string path = (model_dir / "model.onnx").string();
    std::ofstream(path, std::ios::binary) << external_model(c.location).SerializeAsString();
    tsr_model* m = nullptr;
    tsr_status* status = tsr_model_load(path.c_str(), nullptr, &m);
    ASSERT_NE(status, nullptr);
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT);
    for (const char* part : c.expect) {
      EXPECT_NE(std::string(tsr_status_message(status)).find(part), std::string::npos) << tsr_status_message(status);
    }
    tsr_status_free(status);
  }
  // The same file reached directly, through a subfolder, loads.
  const std::string path = (model_dir / "model.onnx").string();
  std::ofstream(path, std::ios::binary) << external_model("./data/w.bin").SerializeAsString();
  tsr_model* m = nullptr;
  tsr_status* status = tsr_model_load(path.c_str(), nullptr, &m);
  EXPECT_EQ(status, nullptr) << tsr_status_message(status);
  tsr_model_free(m);
}

TEST_F(ErrorTest, ExternalDataNumbersAreStrict) {
  write("weights.bin", std::string(48, '\0'));
  for (const char* offset : {"12abc", "-4", " 4", "0x10", "99999999999999999999"}) {
    onnx::ModelProto model = external_model("weights.bin");
    auto* entry = model.mutable_graph()->mutable_initializer(0)->add_external_data();
    entry->set_key("offset");
    entry->set_value(offset);
    expect_load_error(write_model(model), TSR_INVALID_ARGUMENT, {"'w'", "offset", "not a non-negative integer"});
  }
}

// --- Files written: tsr_model_save replaces only a regular file. ---

TEST_F(ErrorTest, SaveReplacesOnlyRegularFiles) {
  tsr_model* m = nullptr;
  ASSERT_EQ(tsr_model_load(write_model(unary_model("Relu")).c_str(), nullptr, &m), nullptr);
  const std::string fifo = (dir_ / "fifo.tsr").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string victim = write("victim.txt", "keep me");
  const std::string link = (dir_ / "link.tsr").string();
  fs::create_symlink(victim, link);
  fs::create_directories(dir_ / "folder.tsr");
  struct Case {
    std::string path;
    const char* expect;
  } cases[] = {{fifo, "is a FIFO"}, {link, "is a symbolic link"}, {(dir_ / "folder.tsr").string(), "is a directory"},
               {(dir_ / "no_such_folder" / "m.tsr").string(), "cannot open its folder"}};
  for (const Case& c : cases) {
    tsr_status* status = tsr_model_save(m, c.path.c_str());
    ASSERT_NE(status, nullptr) << c.path;
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tsr_status_message(status)).find(c.expect), std::string::npos) << tsr_status_message(status);
    EXPECT_NE(std::string(tsr_status_message(status)).find(c.path), std::string::npos) << tsr_status_message(status);
    tsr_status_free(status);
  }
  struct stat info {};
  ASSERT_EQ(::lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));
  ASSERT_EQ(::lstat(link.c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));
  std::ifstream kept(victim);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(kept), {}), "keep me");
  // A regular file is replaced, and nothing is left beside it.
  const std::string target = write("model.tsr", "old bytes");
  ASSERT_EQ(tsr_model_save(m, target.c_str()), nullptr);
  EXPECT_EQ(tsr_file_is_artifact(target.c_str()), 1);
  size_t entries = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) entries += entry.path().filename().string().find(".tmp-") != std::string::npos;
  EXPECT_EQ(entries, 0u);
  tsr_model_free(m);
}

}  // namespace

namespace {

// tsr_tune / tsr_options_set_tuning through the C API: a real tune of a one-node model, its record
// applied, and each bad argument a clear status.
class TuneTest : public ErrorTest {};

std::string status_text(tsr_status* status) {
  std::string text = status ? tsr_status_message(status) : "";
  tsr_status_free(status);
  return text;
}

TEST_F(TuneTest, TunesAppliesAndRefusesBadArguments) {
  const std::string model = write_model(unary_model("Relu"));
  const std::string record = (dir_ / "tuning.json").string();
  int calls = 0;
  tsr_tune_config config{};
  config.struct_size = sizeof(config);
  config.budget_seconds = 5;
  config.progress = [](void* user, const char*, int64_t, int64_t) { ++*static_cast<int*>(user); };
  config.progress_user = &calls;
  char* summary = nullptr;
  ASSERT_EQ(status_text(tsr_tune(model.c_str(), nullptr, &config, record.c_str(), &summary)), "");
  ASSERT_NE(summary, nullptr);
  EXPECT_NE(std::string(summary).find("chosen:"), std::string::npos) << summary;
  tsr_string_free(summary);
  EXPECT_GE(calls, 3);  // default, and each default backend alone, at least

  tsr_options* options = nullptr;
  ASSERT_EQ(tsr_options_create(&options), nullptr);
  ASSERT_EQ(status_text(tsr_options_set_tuning(options, record.c_str())), "");
  tsr_model* m = nullptr;
  ASSERT_EQ(status_text(tsr_model_load(model.c_str(), options, &m)), "");
  EXPECT_EQ(std::string(tsr_model_warnings(m)), "");
  bool tuned = false;
  for (size_t i = 0; i < tsr_model_metadata_count(m); ++i) {
    const char* key = nullptr;
    const char* value = nullptr;
    ASSERT_EQ(tsr_model_metadata(m, i, &key, &value), nullptr);
    tuned |= std::string(key) == "tessera.tuning";
  }
  EXPECT_TRUE(tuned);
  tsr_model_free(m);
  // The same record on another model: a warning, and the default placement.
  const std::string other = write_model(unary_model("Sigmoid"), "other.onnx");
  ASSERT_EQ(status_text(tsr_model_load(other.c_str(), options, &m)), "");
  EXPECT_NE(std::string(tsr_model_warnings(m)).find("made for another model"), std::string::npos);
  tsr_model_free(m);

  EXPECT_NE(status_text(tsr_options_set_tuning(options, (dir_ / "missing.json").string().c_str())).find("cannot open"),
            std::string::npos);
  EXPECT_NE(status_text(tsr_options_set_tuning(options, nullptr)), "");
  tsr_options_free(options);
  EXPECT_NE(status_text(tsr_tune(nullptr, nullptr, nullptr, record.c_str(), nullptr)), "");
  EXPECT_NE(status_text(tsr_tune(model.c_str(), nullptr, nullptr, nullptr, nullptr)), "");
  config.budget_seconds = -1;
  EXPECT_NE(status_text(tsr_tune(model.c_str(), nullptr, &config, record.c_str(), nullptr)).find("budget_seconds"),
            std::string::npos);
  config.struct_size = 0;
  EXPECT_NE(status_text(tsr_tune(model.c_str(), nullptr, &config, record.c_str(), nullptr)).find("struct_size"),
            std::string::npos);
  // A model that does not load is the loader's error, and no record is written.
  const std::string bad_record = (dir_ / "never.json").string();
  EXPECT_NE(status_text(tsr_tune(write("garbage.onnx", "not a model").c_str(), nullptr, nullptr, bad_record.c_str(), nullptr)),
            "");
  EXPECT_FALSE(fs::exists(bad_record));
}

}  // namespace

namespace {

/// x[2,3] -> s = SequenceConstruct(x, x); n = SequenceLength(s); c = ConcatFromSequence(s, axis 0); outputs s, n, c.
onnx::ModelProto sequence_model() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  auto* g = model.mutable_graph();
  g->set_name("g");
  set_type(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  auto* s = g->add_output();
  s->set_name("s");
  s->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  set_type(g->add_output(), "n", onnx::TensorProto::INT64, {});
  auto* c = g->add_output();
  c->set_name("c");
  c->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  auto add = [&](const char* op, std::initializer_list<const char*> in, const char* out) {
    auto* n = g->add_node();
    n->set_name(std::string(op) + "_node");
    n->set_op_type(op);
    for (const char* i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  add("SequenceConstruct", {"x", "x"}, "s");
  add("SequenceLength", {"s"}, "n");
  auto* concat = add("ConcatFromSequence", {"s"}, "c");
  auto* axis = concat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(0);
  return model;
}

std::string take_message(tsr_status* status) {
  std::string message = tsr_status_message(status);
  tsr_status_free(status);
  return message;
}

}  // namespace

TEST_F(ErrorTest, ValuesRunAndRefuseWrongKinds) {
  tsr_model* m = nullptr;
  ASSERT_EQ(tsr_model_load(write_model(sequence_model()).c_str(), nullptr, &m), nullptr);
  tsr_value_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(tsr_model_output_info(m, 0, &info), nullptr);
  EXPECT_EQ(info.kind, TSR_VALUE_SEQUENCE);
  ASSERT_EQ(tsr_model_output_info(m, 1, &info), nullptr);
  EXPECT_EQ(info.kind, TSR_VALUE_TENSOR);

  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[2] = {2, 3};
  DLTensor x{data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
  // The tensor-only entry points refuse the model, naming the sequence output and the entry point to use.
  DLManagedTensor* managed[3] = {};
  tsr_status* status = tsr_model_run_alloc(m, &x, 1, managed, 3);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_UNSUPPORTED);
  const std::string refusal = take_message(status);
  EXPECT_NE(refusal.find("'s'"), std::string::npos) << refusal;
  EXPECT_NE(refusal.find("tsr_model_run_values"), std::string::npos) << refusal;

  tsr_value* input = nullptr;
  ASSERT_EQ(tsr_value_create_tensor(&x, &input), nullptr);
  data[0] = 100;  // the value holds a copy
  tsr_value* out[3] = {};
  ASSERT_EQ(tsr_model_run_values(m, &input, 1, out, 3), nullptr);
  int32_t kind = -1, present = -1;
  size_t count = 0;
  ASSERT_EQ(tsr_value_describe(out[0], &kind, &present, &count), nullptr);
  EXPECT_EQ(kind, TSR_VALUE_SEQUENCE);
  EXPECT_EQ(present, 1);
  EXPECT_EQ(count, 2u);
  const DLTensor* item = nullptr;
  ASSERT_EQ(tsr_value_tensor(out[0], 1, &item), nullptr);
  ASSERT_EQ(item->ndim, 2);
  EXPECT_EQ(static_cast<const float*>(item->data)[0], 1.0f);
  const DLTensor* n = nullptr;
  ASSERT_EQ(tsr_value_tensor(out[1], 0, &n), nullptr);
  EXPECT_EQ(*static_cast<const int64_t*>(n->data), 2);
  const DLTensor* c = nullptr;
  ASSERT_EQ(tsr_value_tensor(out[2], 0, &c), nullptr);
  ASSERT_EQ(c->ndim, 2);
  EXPECT_EQ(c->shape[0], 4);
  EXPECT_EQ(static_cast<const float*>(c->data)[11], 6.0f);  // x stacked twice: row 3 ends with 6
  // Out-of-range accessors are errors, not crashes.
  EXPECT_EQ(tsr_status_code_of(status = tsr_value_tensor(out[0], 2, &item)), TSR_INVALID_ARGUMENT);
  tsr_status_free(status);
  const char* text = nullptr;
  EXPECT_EQ(tsr_status_code_of(status = tsr_value_string(out[1], 0, 0, &text, nullptr)), TSR_INVALID_ARGUMENT);
  EXPECT_NE(take_message(status).find("not strings"), std::string::npos);
  for (tsr_value* v : out) tsr_value_free(v);

  // A sequence where the model wants a tensor.
  const tsr_value* items[2] = {input, input};
  tsr_value* sequence = nullptr;
  ASSERT_EQ(tsr_value_create_sequence(items, 2, &sequence), nullptr);
  status = tsr_model_run_values(m, const_cast<const tsr_value* const*>(&sequence), 1, out, 3);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT);
  const std::string wrong_kind = take_message(status);
  EXPECT_NE(wrong_kind.find("input 'x' is a tensor, but a sequence was given"), std::string::npos) << wrong_kind;
  for (tsr_value* v : out) EXPECT_EQ(v, nullptr);

  // Building values: mixed dtypes, an optional of an optional, bad kinds, NULLs.
  int64_t ints[2] = {1, 2};
  int64_t ishape[1] = {2};
  DLTensor xi{ints, {kDLCPU, 0}, 1, {kDLInt, 64, 1}, ishape, nullptr, 0};
  tsr_value* int_value = nullptr;
  ASSERT_EQ(tsr_value_create_tensor(&xi, &int_value), nullptr);
  const tsr_value* mixed[2] = {input, int_value};
  tsr_value* bad = nullptr;
  EXPECT_NE(take_message(tsr_value_create_sequence(mixed, 2, &bad)).find("a sequence holds one dtype"), std::string::npos);
  EXPECT_EQ(bad, nullptr);
  tsr_value* optional = nullptr;
  ASSERT_EQ(tsr_value_create_optional(sequence, TSR_VALUE_OPTIONAL_SEQUENCE, &optional), nullptr);
  EXPECT_NE(take_message(tsr_value_create_optional(optional, TSR_VALUE_OPTIONAL_SEQUENCE, &bad)).find("already an optional"),
            std::string::npos);
  EXPECT_NE(take_message(tsr_value_create_optional(nullptr, TSR_VALUE_SEQUENCE, &bad)).find("kind must be"), std::string::npos);
  const char* words[2] = {"a", nullptr};
  EXPECT_NE(take_message(tsr_value_create_strings(words, nullptr, ishape, 1, &bad)).find("element 1 is NULL"), std::string::npos);
  int64_t negative[1] = {-1};
  EXPECT_NE(take_message(tsr_value_create_strings(words, nullptr, negative, 1, &bad)).find("negative"), std::string::npos);
  EXPECT_EQ(tsr_status_code_of(status = tsr_value_create_tensor(nullptr, &bad)), TSR_INVALID_ARGUMENT);
  tsr_status_free(status);
  const char* utf8[2] = {"h\xC3\xA9", "x"};
  tsr_value* strings = nullptr;
  ASSERT_EQ(tsr_value_create_strings(utf8, nullptr, ishape, 1, &strings), nullptr);
  size_t length = 0;
  ASSERT_EQ(tsr_value_string(strings, 0, 0, &text, &length), nullptr);
  EXPECT_EQ(std::string(text, length), "h\xC3\xA9");
  EXPECT_EQ(tsr_status_code_of(status = tsr_value_string(strings, 0, 2, &text, &length)), TSR_INVALID_ARGUMENT);
  tsr_status_free(status);
  for (tsr_value* v : {input, sequence, int_value, optional, strings}) tsr_value_free(v);
  tsr_model_free(m);
}
