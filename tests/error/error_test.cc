// Bad input is a test subject: every malformed model, unknown op, bad dtype,
// missing initializer, inconsistent shape or bad run-time input must give a
// clear user error (naming node, op and value) through the C API, never an
// abort. Models are built here with the ONNX protobuf API. Files, tuning and
// tsr_value errors are in capi_files_values_test.cc.
#include "error/error_fixture.h"

namespace tessera_error_tests {
namespace {

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
  onnx::ModelProto model = external_model("weights.bin");
  auto* init = model.mutable_graph()->mutable_initializer(0);
  for (auto [k, v] : {std::pair{"offset", "4"}, std::pair{"length", "24"}}) {
    auto* e = init->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
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

TEST_F(ErrorTest, OpenSymbolicDimensionCompilesOnceForEveryValue) {
  onnx::ModelProto model = unary_model("Relu");
  for (auto* v : {model.mutable_graph()->mutable_input(0), model.mutable_graph()->mutable_output(0)}) {
    v->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  }
  // Unbound, the dim stays open: one compile runs every batch size, 0 included.
  tsr_model* open = nullptr;
  tsr_status* loaded = tsr_model_load(write_model(model).c_str(), nullptr, &open);
  ASSERT_EQ(loaded, nullptr) << tsr_status_message(loaded);
  tsr_value_info open_info{};
  open_info.struct_size = sizeof(open_info);
  ASSERT_EQ(tsr_model_input_info(open, 0, &open_info), nullptr);
  ASSERT_EQ(open_info.ndim, 2u);
  EXPECT_EQ(open_info.shape[0], -1);
  EXPECT_STREQ(open_info.dim_names[0], "batch");
  for (int64_t batch : {1, 4, 0, 7}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    std::vector<float> x(static_cast<size_t>(batch * 3)), y(x.size(), -99.0f);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 5) - 2.5f;
    int64_t shape[2] = {batch, 3};
    DLTensor in{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
    DLTensor out{y.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
    tsr_status* ran = tsr_model_run(open, &in, 1, &out, 1);
    ASSERT_EQ(ran, nullptr) << tsr_status_message(ran);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i] > 0 ? x[i] : 0.0f) << "element " << i;
  }
  {
    // A buffer whose open dim differs from what the run made, and an input whose fixed dim differs,
    // are errors naming the value and both shapes; the model stays usable.
    std::vector<float> x(6, 1.0f), y(9, 0.0f);
    int64_t in_shape[2] = {2, 3}, out_shape[2] = {3, 3}, bad_shape[2] = {2, 4};
    DLTensor in{x.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, in_shape, nullptr, 0};
    DLTensor out{y.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, out_shape, nullptr, 0};
    tsr_status* status = tsr_model_run(open, &in, 1, &out, 1);
    ASSERT_NE(status, nullptr);
    EXPECT_NE(std::string(tsr_status_message(status)).find("output 'y' is 2x3"), std::string::npos) << tsr_status_message(status);
    tsr_status_free(status);
    std::vector<float> wide(8, 1.0f);
    DLTensor bad{wide.data(), {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, bad_shape, nullptr, 0};
    status = tsr_model_run(open, &bad, 1, &out, 1);
    ASSERT_NE(status, nullptr);
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(tsr_status_message(status)).find("input 'x'"), std::string::npos) << tsr_status_message(status);
    tsr_status_free(status);
    out.shape = in_shape;
    status = tsr_model_run(open, &in, 1, &out, 1);
    EXPECT_EQ(status, nullptr) << tsr_status_message(status);
    EXPECT_EQ(y[0], 1.0f);
  }
  tsr_model_free(open);
  // Binding it by name fixes it.
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
  // Strides an output buffer cannot have (elements not row-major: a transposed view) are refused; an
  // input may have any (read through a copy where the model needs contiguous memory).
  DLTensor transposed_out{y, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, transposed, 0};
  expect_run_error(m, &in, 1, &transposed_out, 1, "output 'y': its strides");
  expect_run_error(m, &in, 1, &transposed_out, 1, "row-major in a larger buffer");
  int64_t backwards[2] = {-3, 1};
  DLTensor negative_in{x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, backwards, 0};
  expect_run_error(m, &negative_in, 1, &out, 1, "input 'x': negative strides are not supported");
  for (float v : y) EXPECT_EQ(v, 0.0f);  // no failed run wrote anything
  {
    // x read transposed: x as [2, 3] with strides {1, 2} is [[-1, -3, -5], [2, 4, 6]].
    int64_t transposed_shape[2] = {2, 3};
    DLTensor transposed_in{x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, transposed_shape, transposed, 0};
    float z[6] = {};
    DLTensor z_out{z, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, nullptr, 0};
    ASSERT_EQ(tsr_model_run(m, &transposed_in, 1, &z_out, 1), nullptr);
    const float relu_of_transposed[6] = {0, 0, 0, 2, 4, 6};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(z[i], relu_of_transposed[i]) << i;
  }
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
  // The nodes inside control-flow bodies: this model has none, so room for some is refused too, and an
  // index past them is an error.
  double inner_ms[3] = {};
  profile.inner_node_milliseconds = inner_ms;
  profile.num_inner_nodes = 3;
  EXPECT_EQ(tsr_model_inner_node_count(m), 0u);
  status = tsr_model_report(m, "json", "m", &profile, &text);
  ASSERT_NE(status, nullptr);
  EXPECT_NE(std::string(tsr_status_message(status)).find("0 nodes inside control-flow bodies but room for 3"), std::string::npos)
      << tsr_status_message(status);
  tsr_status_free(status);
  const char* path = nullptr;
  status = tsr_model_inner_node(m, 0, nullptr, &path, nullptr, nullptr);
  ASSERT_NE(status, nullptr);
  EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << tsr_status_message(status);
  tsr_status_free(status);
  EXPECT_EQ(path, nullptr);
  EXPECT_EQ(tsr_model_inner_node_count(nullptr), 0u);
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

}  // namespace
}  // namespace tessera_error_tests
