// Heap allocations of a run's bookkeeping, counted by replacing this binary's
// global operator new (counting only while a test asks, on its own thread).
// A native node's run plans its broadcast, points at its inputs and outputs,
// looks up its attributes and splits its work without allocating, and a
// compiled Loop body's trip reuses its input views: a Loop of small products
// (MatMul, a bias Add, Tanh) made 43 heap allocations a trip before, most of
// its time at 2048 trips. What is left is one a trip: CompiledModel::run's
// vector of results (empty here: the body writes into the Loop's buffers).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdlib>
#include <new>

#include "frontend/onnx/onnx_importer.h"
#include "onnx_proto_builder.h"
#include "runtime/session.h"

namespace {
thread_local bool counting = false;
thread_local long allocations = 0;
}  // namespace

void* operator new(std::size_t size) {
  if (counting) ++allocations;
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  if (counting) ++allocations;
  return std::malloc(size ? size : 1);
}
// Every form that frees what the forms above allocate (under ASan a nothrow new left to the runtime
// and freed here was an alloc-dealloc mismatch): the array forms call these.
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void* operator new[](std::size_t size) { return operator new(size); }
void* operator new[](std::size_t size, const std::nothrow_t& tag) noexcept { return operator new(size, tag); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace tessera {
namespace {

using onnx::TensorProto;
using testing::add_node;
using testing::add_value_info;

float weight(int i, int j) { return 0.05f * static_cast<float>((i * 7 + j * 3) % 11) - 0.25f; }

/// h_n, hs = Loop(n, h0): h = Tanh(h @ W + bias) each trip, every h stacked (W an initializer the body
/// captures, bias a graph input).
onnx::ModelProto rnn_loop() {
  onnx::GraphProto g;
  add_value_info(g.mutable_input(), "n", TensorProto::INT64, {});
  add_value_info(g.mutable_input(), "h0", TensorProto::FLOAT, {2, 8});
  add_value_info(g.mutable_input(), "bias", TensorProto::FLOAT, {8});
  auto* w = g.add_initializer();
  w->set_name("w");
  w->set_data_type(TensorProto::FLOAT);
  w->add_dims(8);
  w->add_dims(8);
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) w->add_float_data(weight(i, j));
  }
  onnx::GraphProto body;
  body.set_name("body");
  add_value_info(body.mutable_input(), "i", TensorProto::INT64, {});
  add_value_info(body.mutable_input(), "cond_in", TensorProto::BOOL, {});
  add_value_info(body.mutable_input(), "h_in", TensorProto::FLOAT, {2, 8});
  add_node(&body, "Identity", {"cond_in"}, {"cond_out"});
  add_node(&body, "MatMul", {"h_in", "w"}, {"hw"});
  add_node(&body, "Add", {"hw", "bias"}, {"pre"});
  add_node(&body, "Tanh", {"pre"}, {"h_out"});
  add_node(&body, "Identity", {"h_out"}, {"scan"});
  add_value_info(body.mutable_output(), "cond_out", TensorProto::BOOL, {});
  add_value_info(body.mutable_output(), "h_out", TensorProto::FLOAT, {2, 8});
  add_value_info(body.mutable_output(), "scan", TensorProto::FLOAT, {2, 8});
  auto* loop = add_node(&g, "Loop", {"n", "", "h0"}, {"h_n", "hs"});
  testing::add_graph_attr(loop, "body", body);
  add_value_info(g.mutable_output(), "h_n", TensorProto::FLOAT, {2, 8});
  g.add_output()->set_name("hs");
  return testing::model_of(g, 17);
}

TEST(RunAllocations, ACompiledLoopTripOfSmallProductsAllocatesAtMostItsResultsVector) {
  CompileOptions options;
  options.backends = {"native"};
  auto compiled = CompiledModel::compile(onnx_frontend::import_onnx_bytes(rnn_loop().SerializeAsString(), ""), options);
  Tensor h0(DType::kFloat32, {2, 8}), bias(DType::kFloat32, {8});
  for (int64_t k = 0; k < 16; ++k) h0.as<float>()[k] = 0.1f * static_cast<float>(k % 5) - 0.2f;
  for (int64_t k = 0; k < 8; ++k) bias.as<float>()[k] = 0.03f * static_cast<float>(k) - 0.1f;
  auto run = [&](int64_t trips) {
    Tensor n(DType::kInt64, {});
    *n.as<int64_t>() = trips;
    counting = true;
    allocations = 0;
    std::vector<Tensor> out = compiled->run({n.view(), h0.view(), bias.view()});
    counting = false;
    return std::make_pair(allocations, std::move(out));
  };
  run(64);  // warm-up: the run's store, pools and the body's buffers reach their sizes
  // 33 and 64 trips grow the stacked rows' buffer alike (to 16, 32 and 64 rows): the difference is 31 trips.
  const long few = run(33).first;
  auto [many, out] = run(64);
  const double per_trip = static_cast<double>(many - few) / 31.0;
  EXPECT_LE(per_trip, 1.0) << few << " allocations at 33 trips, " << many << " at 64";
  // And it computed the recurrence (double reference).
  double h[2][8];
  for (int r = 0; r < 2; ++r) {
    for (int c = 0; c < 8; ++c) h[r][c] = h0.as<float>()[r * 8 + c];
  }
  for (int t = 0; t < 64; ++t) {
    double next[2][8];
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 8; ++c) {
        double sum = bias.as<float>()[c];
        for (int k = 0; k < 8; ++k) sum += h[r][k] * weight(k, c);
        next[r][c] = std::tanh(sum);
      }
    }
    std::copy(&next[0][0], &next[0][0] + 16, &h[0][0]);
  }
  ASSERT_EQ(out.size(), 2u);
  ASSERT_EQ(out[1].shape(), (Shape{64, 2, 8}));
  for (int k = 0; k < 16; ++k) EXPECT_NEAR(out[0].as<float>()[k], h[k / 8][k % 8], 2e-5) << k;
}

}  // namespace
}  // namespace tessera
