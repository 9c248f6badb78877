// The fixture the C API error tests share: a temporary folder per test, files
// written into it, expect_load_error, and small ONNX models built with the
// protobuf API (error_test.cc, capi_files_values_test.cc).
#pragma once
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

namespace tessera_error_tests {

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

inline void set_type(onnx::ValueInfoProto* v, const std::string& name, int elem_type, std::initializer_list<int64_t> dims) {
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  auto* shape = t->mutable_shape();
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

/// x[2,3] -> op -> y
inline onnx::ModelProto unary_model(const std::string& op, int opset = 13) {
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
inline onnx::ModelProto external_model(const std::string& location) {
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

}  // namespace tessera_error_tests
