// Initializers' raw_data lifted out of the serialized model before parsing
// (frontend/onnx/raw_data_spans.h): the constants must be exactly what
// protobuf's own parse of the same bytes gives, in the wire format's corner
// cases too (a field repeated, graphs merged, empty data), and bad data must
// still be refused naming the tensor.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cstring>

#include "frontend/onnx/onnx_importer.h"
#include "frontend/onnx/raw_data_spans.h"
#include "frontend/onnx/tensor_proto.h"
#include "expect_error.h"
#include "ir/error.h"

namespace tessera {
namespace {

std::string varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

/// A length-delimited field, written by hand (so that a message may repeat a singular field).
std::string field(int number, const std::string& payload) {
  return varint((static_cast<uint64_t>(number) << 3) | 2) + varint(payload.size()) + payload;
}

template <typename T>
std::string bytes_of(std::initializer_list<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

onnx::TensorProto tensor_header(const std::string& name, int dtype, std::initializer_list<int64_t> dims) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(dtype);
  for (int64_t d : dims) t.add_dims(d);
  return t;
}

/// A graph whose outputs are its initializers (Identity of each), serialized without them.
std::string graph_head(const std::vector<std::string>& names, const std::string& graph_name) {
  onnx::GraphProto g;
  g.set_name(graph_name);
  for (const std::string& name : names) {
    auto* n = g.add_node();
    n->set_op_type("Identity");
    n->add_input(name);
    n->add_output(name + "_out");
    g.add_output()->set_name(name + "_out");
  }
  return g.SerializeAsString();
}

std::string model_head() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  return m.SerializeAsString();
}

/// Every constant of the imported model against protobuf's parse of the same bytes: same dtype,
/// shape and bytes.
void expect_same_as_protobuf(const std::string& bytes, size_t expected_lifted) {
  onnx_frontend::LiftedRawData lifted;
  ASSERT_TRUE(onnx_frontend::lift_initializer_raw_data(bytes.data(), bytes.size(), &lifted));  // not the fallback
  EXPECT_EQ(lifted.raw_data.size(), expected_lifted);
  onnx::ModelProto reference;
  ASSERT_TRUE(reference.ParseFromString(bytes));
  Graph g = onnx_frontend::import_onnx_bytes(bytes, "");
  ASSERT_EQ(static_cast<size_t>(reference.graph().initializer_size()), expected_lifted);
  for (const onnx::TensorProto& proto : reference.graph().initializer()) {
    SCOPED_TRACE(proto.name());
    Tensor want = onnx_frontend::tensor_from_proto(proto, "");
    const ValueId id = g.find_value(proto.name());
    ASSERT_NE(id, kNoValue);
    ASSERT_TRUE(g.value(id).constant);
    const Tensor& got = *g.value(id).constant;
    EXPECT_EQ(got.dtype(), want.dtype());
    EXPECT_EQ(got.shape(), want.shape());
    ASSERT_EQ(got.nbytes(), want.nbytes());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.nbytes()), 0);
  }
}

TEST(RawDataLift, ConstantsMatchProtobufsOwnParse) {
  // float and int64 raw data, a typed float_data tensor, an empty raw tensor, a scalar.
  onnx::TensorProto f = tensor_header("f", onnx::TensorProto::FLOAT, {2, 3});
  f.set_raw_data(bytes_of<float>({1.5f, -2.f, 3.25f, 0.f, -0.f, 7.f}));
  onnx::TensorProto i = tensor_header("i", onnx::TensorProto::INT64, {3});
  i.set_raw_data(bytes_of<int64_t>({-1, 1LL << 40, 5}));
  onnx::TensorProto typed = tensor_header("typed", onnx::TensorProto::FLOAT, {2});
  typed.add_float_data(0.5f);
  typed.add_float_data(-4.f);
  onnx::TensorProto empty = tensor_header("empty", onnx::TensorProto::FLOAT, {0, 4});
  empty.set_raw_data("");
  onnx::TensorProto scalar = tensor_header("scalar", onnx::TensorProto::DOUBLE, {});
  scalar.set_raw_data(bytes_of<double>({3.0}));
  std::string graph = graph_head({"f", "i", "typed", "empty", "scalar"}, "g");
  for (const onnx::TensorProto* t : {&f, &i, &typed, &empty, &scalar}) graph += field(5, t->SerializeAsString());
  expect_same_as_protobuf(model_head() + field(7, graph), 5);
}

TEST(RawDataLift, ARepeatedRawDataFieldKeepsTheLastAsProtobufDoes) {
  onnx::TensorProto w = tensor_header("w", onnx::TensorProto::FLOAT, {2});
  const std::string tensor = w.SerializeAsString() + field(9, bytes_of<float>({1.f, 2.f})) +
                             field(9, bytes_of<float>({-3.f, 4.5f}));
  const std::string bytes = model_head() + field(7, graph_head({"w"}, "g") + field(5, tensor));
  expect_same_as_protobuf(bytes, 1);
  Graph g = onnx_frontend::import_onnx_bytes(bytes, "");
  const Tensor& c = *g.value(g.find_value("w")).constant;
  EXPECT_EQ(c.as<float>()[0], -3.f);
  EXPECT_EQ(c.as<float>()[1], 4.5f);
}

TEST(RawDataLift, TwoGraphFieldsMergeTheirInitializersInOrder) {
  // protobuf merges a message field that appears twice; the initializer lists concatenate.
  onnx::TensorProto a = tensor_header("a", onnx::TensorProto::INT32, {2});
  a.set_raw_data(bytes_of<int32_t>({7, -8}));
  onnx::TensorProto b = tensor_header("b", onnx::TensorProto::UINT8, {3});
  b.set_raw_data(std::string("\x01\xff\x80", 3));
  const std::string bytes = model_head() + field(7, graph_head({"a"}, "g") + field(5, a.SerializeAsString())) +
                            field(7, graph_head({"b"}, "g") + field(5, b.SerializeAsString()));
  expect_same_as_protobuf(bytes, 2);
}

TEST(RawDataLift, BadDataIsStillRefusedNamingTheTensor) {
  onnx::TensorProto short_data = tensor_header("short", onnx::TensorProto::FLOAT, {4});
  short_data.set_raw_data(bytes_of<float>({1.f, 2.f}));
  EXPECT_USER_ERROR(onnx_frontend::import_onnx_bytes(
                        model_head() + field(7, graph_head({"short"}, "g") + field(5, short_data.SerializeAsString())), ""),
                    "tensor 'short' has 8 bytes of raw data");
  onnx::TensorProto text = tensor_header("text", onnx::TensorProto::STRING, {1});
  text.set_raw_data("abcd");
  EXPECT_USER_ERROR(onnx_frontend::import_onnx_bytes(
                        model_head() + field(7, graph_head({"text"}, "g") + field(5, text.SerializeAsString())), ""),
                    "string tensor with raw or external data");
}

TEST(RawDataLift, MalformedBytesFallBackToTheParsersError) {
  onnx::TensorProto w = tensor_header("w", onnx::TensorProto::FLOAT, {2});
  w.set_raw_data(bytes_of<float>({1.f, 2.f}));
  const std::string bytes = model_head() + field(7, graph_head({"w"}, "g") + field(5, w.SerializeAsString()));
  onnx_frontend::LiftedRawData lifted;
  for (size_t cut : {bytes.size() - 1, bytes.size() - 5, size_t{3}}) {
    const std::string truncated = bytes.substr(0, cut);
    EXPECT_FALSE(onnx_frontend::lift_initializer_raw_data(truncated.data(), truncated.size(), &lifted)) << cut;
    EXPECT_USER_ERROR(onnx_frontend::import_onnx_bytes(truncated, ""), "not a valid ONNX model");
  }
  // A length that runs past the end, and a varint of eleven bytes.
  const std::string overlong = model_head() + varint((7 << 3) | 2) + varint(1u << 30) + "xx";
  EXPECT_FALSE(onnx_frontend::lift_initializer_raw_data(overlong.data(), overlong.size(), &lifted));
  const std::string endless = model_head() + std::string(11, '\xff');
  EXPECT_FALSE(onnx_frontend::lift_initializer_raw_data(endless.data(), endless.size(), &lifted));
  // No raw data at all: nothing to lift, the plain parse imports it.
  const std::string plain = model_head() + field(7, graph_head({}, "g"));
  EXPECT_FALSE(onnx_frontend::lift_initializer_raw_data(plain.data(), plain.size(), &lifted));
}

}  // namespace
}  // namespace tessera
