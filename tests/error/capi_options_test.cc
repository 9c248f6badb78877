// tsr_options_set: the C API's one list of option names, which the CLI, Python
// and the torch op all set through it. Each name sets what its typed setter
// sets (checked by what a compile then does), and a bad name or value is a
// clear TSR_INVALID_ARGUMENT naming the option.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <sstream>
#include <string>

#include "error/error_fixture.h"

namespace tessera_error_tests {
namespace {

std::string message_of(tsr_status* status) {
  std::string text = status ? tsr_status_message(status) : "";
  tsr_status_free(status);
  return text;
}

class OptionsTest : public ErrorTest {
 protected:
  void SetUp() override {
    ErrorTest::SetUp();
    ASSERT_EQ(tsr_options_create(&options_), nullptr);
  }
  void TearDown() override {
    tsr_options_free(options_);
    ErrorTest::TearDown();
  }
  /// Compiles a one-Relu model with the options set so far; "" or the error.
  std::string compile_relu(std::string* backend = nullptr) {
    tsr_model* model = nullptr;
    const std::string error = message_of(tsr_model_load(write_model(unary_model("Relu")).c_str(), options_, &model));
    if (model && backend) {
      const char *node = nullptr, *op = nullptr, *where = nullptr;
      if (tsr_model_node_placement(model, 0, &node, &op, &where) == nullptr) *backend = where;
    }
    tsr_model_free(model);
    return error;
  }
  tsr_options* options_ = nullptr;
};

TEST_F(OptionsTest, TheNamesAreTheDocumentedOnesOnce) {
  std::set<std::string> names;
  std::istringstream list(tsr_option_names());
  for (std::string name; std::getline(list, name, ',');) EXPECT_TRUE(names.insert(name).second) << name << " twice";
  EXPECT_EQ(names, (std::set<std::string>{"threads", "backends", "place", "deny", "min_region_size", "strict", "precision",
                                          "tuning", "freeze_weights", "dim_bounds", "input_values"}));
}

TEST_F(OptionsTest, EachNameSetsWhatItsSetterSets) {
  // backends and strict: a strict native-only compile runs the Relu on native.
  ASSERT_EQ(message_of(tsr_options_set(options_, "backends", "native")), "");
  ASSERT_EQ(message_of(tsr_options_set(options_, "strict", "true")), "");
  ASSERT_EQ(message_of(tsr_options_set(options_, "threads", "2")), "");
  ASSERT_EQ(message_of(tsr_options_set(options_, "min_region_size", "3")), "");
  ASSERT_EQ(message_of(tsr_options_set(options_, "precision", "fp32")), "");
  ASSERT_EQ(message_of(tsr_options_set(options_, "freeze_weights", "0")), "");
  std::string backend;
  EXPECT_EQ(compile_relu(&backend), "");
  EXPECT_EQ(backend, "native");
  // place wins over the backend order; deny is read as the setter reads it (a denial of an unknown
  // backend is refused at compile time, naming it).
  ASSERT_EQ(message_of(tsr_options_set(options_, "backends", "test,native")), "");
  ASSERT_EQ(message_of(tsr_options_set(options_, "min_region_size", "1")), "");
  ASSERT_EQ(message_of(tsr_options_set(options_, "place", "the_node=native")), "");
  EXPECT_EQ(compile_relu(&backend), "");
  EXPECT_EQ(backend, "native");
  ASSERT_EQ(message_of(tsr_options_set(options_, "deny", "no_such_backend:Relu")), "");
  EXPECT_NE(compile_relu().find("no_such_backend"), std::string::npos);
}

TEST_F(OptionsTest, AFixedInputReportsItsValue) {
  // y = x * Cast(sr): input_values fixes sr, and its info gives that value (the CLI feeds it to the inputs
  // it makes); x's is null, and a caller built before the field (smaller struct_size) keeps its own.
  onnx::ModelProto proto = unary_model("Mul", 17);
  auto* g = proto.mutable_graph();
  set_type(g->add_input(), "sr", onnx::TensorProto::INT64, {});
  g->mutable_node(0)->add_input("srf");
  auto* cast = g->add_node();
  cast->set_op_type("Cast");
  cast->add_input("sr");
  cast->add_output("srf");
  auto* to = cast->add_attribute();
  to->set_name("to");
  to->set_type(onnx::AttributeProto::INT);
  to->set_i(onnx::TensorProto::FLOAT);
  g->mutable_node()->SwapElements(0, 1);  // Cast before the Mul
  ASSERT_EQ(message_of(tsr_options_set(options_, "input_values", "sr=-16000")), "");
  tsr_model* model = nullptr;
  ASSERT_EQ(message_of(tsr_model_load(write_model(proto).c_str(), options_, &model)), "");
  tsr_value_info info{};
  info.struct_size = sizeof(info);
  ASSERT_EQ(tsr_model_input_info(model, 1, &info), nullptr);
  ASSERT_NE(info.fixed_value, nullptr);
  EXPECT_EQ(*static_cast<const int64_t*>(info.fixed_value), -16000);
  ASSERT_EQ(tsr_model_input_info(model, 0, &info), nullptr);
  EXPECT_EQ(info.fixed_value, nullptr);
  const int64_t sentinel = 7;
  info.fixed_value = &sentinel;
  info.struct_size = offsetof(tsr_value_info, fixed_value);
  ASSERT_EQ(tsr_model_input_info(model, 1, &info), nullptr);
  EXPECT_EQ(info.fixed_value, &sentinel);
  tsr_model_free(model);
}

TEST_F(OptionsTest, BadNamesAndValuesNameTheOption) {
  struct Bad {
    const char* name;
    const char* value;
    const char* part;
  };
  for (const Bad& bad : std::initializer_list<Bad>{
           {"thread", "2", "unknown option 'thread' (known: threads,"},
           {"", "1", "unknown option ''"},
           {"threads", "0", "option 'threads': '0' is not an integer from 1 to 1024"},
           {"threads", "2x", "option 'threads': '2x' is not an integer"},
           {"threads", "", "option 'threads': '' is not an integer"},
           {"threads", "99999999999999999999", "is not an integer"},
           {"min_region_size", "-1", "option 'min_region_size': '-1'"},
           {"strict", "yes", "option 'strict': 'yes' is not 1, 0, true or false"},
           {"freeze_weights", "2", "option 'freeze_weights': '2'"},
           {"precision", "fp4", "fp4"},
           {"place", "no equals sign", "no equals sign"},
           {"tuning", "/no/such/record.json", "/no/such/record.json"},
           {"dim_bounds", "past", "option 'dim_bounds': 'past' is not NAME=MIN..MAX"},
           {"dim_bounds", "past=1..", "is not NAME=MIN..MAX"},
           {"dim_bounds", "past=-1..4", "is not NAME=MIN..MAX"},
           {"dim_bounds", "=1..4", "is not NAME=MIN..MAX"},
           {"dim_bounds", "past=1..99999999999999999999", "is not NAME=MIN..MAX"},
           {"dim_bounds", "past=5..4", "0 <= MIN <= MAX"},
           {"input_values", "sr", "option 'input_values': 'sr' is not NAME=VALUE"},
           {"input_values", "=16000", "is not NAME=VALUE"},
           {"input_values", "sr=", "is not NAME=VALUE"},
       }) {
    tsr_status* status = tsr_options_set(options_, bad.name, bad.value);
    ASSERT_NE(status, nullptr) << bad.name << "=" << bad.value;
    EXPECT_EQ(tsr_status_code_of(status), TSR_INVALID_ARGUMENT) << bad.name;
    const std::string message = message_of(status);
    EXPECT_NE(message.find(bad.part), std::string::npos) << message;
  }
  EXPECT_NE(message_of(tsr_options_set(nullptr, "threads", "1")), "");
  EXPECT_NE(message_of(tsr_options_set(options_, nullptr, "1")), "");
  EXPECT_NE(message_of(tsr_options_set(options_, "threads", nullptr)), "");
  // Nothing bad was kept: the options still compile.
  EXPECT_EQ(compile_relu(), "");
}

}  // namespace
}  // namespace tessera_error_tests
