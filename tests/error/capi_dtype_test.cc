// tsr_dtype_name: the one table of dtype names the CLI, Python and PyTorch print, against the names
// written out here (DLPack's codes from dlpack.h, Tessera's bool and string codes from tessera.h).
#include <gtest/gtest.h>

#include <string>

#include "tessera/tessera.h"

namespace {

std::string name_of(uint8_t code, uint8_t bits, uint16_t lanes = 1) {
  const char* name = tsr_dtype_name(DLDataType{code, bits, lanes});
  return name ? name : "(null)";
}

TEST(CapiDtypeName, NamesEveryDtypeTesseraHasAndNothingElse) {
  EXPECT_EQ(name_of(kDLFloat, 32), "float32");
  EXPECT_EQ(name_of(kDLFloat, 16), "float16");
  EXPECT_EQ(name_of(kDLFloat, 64), "float64");
  EXPECT_EQ(name_of(kDLBfloat, 16), "bfloat16");
  EXPECT_EQ(name_of(kDLInt, 8), "int8");
  EXPECT_EQ(name_of(kDLInt, 64), "int64");
  EXPECT_EQ(name_of(kDLUInt, 8), "uint8");
  EXPECT_EQ(name_of(kDLUInt, 32), "uint32");
  EXPECT_EQ(name_of(TSR_DL_BOOL_CODE, 8), "bool");
  EXPECT_EQ(name_of(TSR_DL_STRING_CODE, 8), "str");
  // No tensors of these: no name (callers say "unknown" or describe the code).
  EXPECT_EQ(name_of(kDLFloat, 8), "(null)");
  EXPECT_EQ(name_of(kDLInt, 4), "(null)");
  EXPECT_EQ(name_of(kDLFloat, 32, 4), "(null)");
  EXPECT_EQ(name_of(kDLBfloat, 32), "(null)");
  EXPECT_EQ(name_of(200, 8), "(null)");
}

}  // namespace

// tsr_model_check's sized config: NULL and an older, shorter struct read as the defaults; a field the
// caller set is used; a struct too small to hold its own size is an error.
#include <onnx/onnx_pb.h>

#include <cstddef>
#include <cstring>
#include <vector>

namespace {

/// y = Relu(x), x float32[4], as ONNX bytes.
std::string relu_bytes() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(13);
  auto* g = model.mutable_graph();
  g->set_name("relu");
  auto value = [](onnx::ValueInfoProto* v, const char* name) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(4);
  };
  value(g->add_input(), "x");
  value(g->add_output(), "y");
  auto* n = g->add_node();
  n->set_op_type("Relu");
  n->add_input("x");
  n->add_output("y");
  return model.SerializeAsString();
}

TEST(CapiCheckConfig, NullAndShorterConfigsReadAsTheDefaultsAndSetFieldsAreUsed) {
  const std::string bytes = relu_bytes();
  tsr_options* options = nullptr;
  ASSERT_EQ(tsr_options_create(&options), nullptr);
  ASSERT_EQ(tsr_options_set_backends(options, "test,native"), nullptr);  // a region the check compares
  tsr_model* model = nullptr;
  ASSERT_EQ(tsr_model_load_from_memory(bytes.data(), bytes.size(), "relu", options, &model), nullptr);
  tsr_options_free(options);
  std::vector<float> x = {-1.0f, 0.5f, 2.0f, -3.0f};
  int64_t shape[1] = {4};
  DLTensor in{};
  in.data = x.data();
  in.device = {kDLCPU, 0};
  in.ndim = 1;
  in.dtype = {kDLFloat, 32, 1};
  in.shape = shape;
  auto json_of = [&](const tsr_check_config* config, size_t* flagged) {
    char* json = nullptr;
    tsr_status* s = tsr_model_check(model, &in, 1, config, nullptr, &json, nullptr, flagged);
    EXPECT_EQ(s, nullptr) << (s ? tsr_status_message(s) : "");
    tsr_status_free(s);
    std::string text = json ? json : "";
    tsr_string_free(json);
    return text;
  };
  size_t flagged = 7;
  const std::string defaults = json_of(nullptr, &flagged);
  EXPECT_EQ(flagged, 0u);
  EXPECT_NE(defaults.find("\"tolerance\": 0.0001"), std::string::npos) << defaults;
  // An older caller's struct: struct_size and tolerance only; what follows is junk it never wrote.
  alignas(tsr_check_config) unsigned char raw[sizeof(tsr_check_config)];
  std::memset(raw, 0x5A, sizeof(raw));
  tsr_check_config older{};
  older.struct_size = offsetof(tsr_check_config, min_cosine);
  older.tolerance = 0.25;
  std::memcpy(raw, &older, older.struct_size);
  const std::string shorter = json_of(reinterpret_cast<const tsr_check_config*>(raw), &flagged);
  EXPECT_NE(shorter.find("\"tolerance\": 0.25"), std::string::npos) << shorter;
  EXPECT_EQ(shorter.find("relu\""), std::string::npos) << "the junk model_name was read";
  // A full one: the name labels the report.
  tsr_check_config full{};
  full.struct_size = sizeof(full);
  full.tolerance = -1;
  full.min_cosine = -1;
  full.model_name = "labelled";
  EXPECT_NE(json_of(&full, &flagged).find("labelled"), std::string::npos);
  // Too small to hold its own size.
  tsr_check_config tiny{};
  tiny.struct_size = 3;
  tsr_status* s = tsr_model_check(model, &in, 1, &tiny, nullptr, nullptr, nullptr, nullptr);
  ASSERT_NE(s, nullptr);
  EXPECT_NE(std::string(tsr_status_message(s)).find("struct_size is too small"), std::string::npos);
  tsr_status_free(s);
  tsr_model_free(model);
}

}  // namespace
