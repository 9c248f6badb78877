// Tests of the example accelerator plug-in (plugins/example_accelerator/) through
// its C ABI only: the module is dlopened (path: argv[1], else the compile
// definition EXAMPLE_ACCELERATOR_PLUGIN_PATH), regions are hand-built tsrp_graph
// views, tensors live in the plug-in's memory space (copied in and out as the
// host does), and every result is compared with the naive references of
// region_builder.h. Also: support() refusals carry reasons; hostile payloads
// (truncated, random, bad indices) give an error status, never a crash; pointers
// the device did not allocate are refused; injected failures leak nothing; every
// test ends with no live device allocation.
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>

#include "region_builder.h"

namespace example_accelerator_test {
namespace {

const char* g_plugin_path = EXAMPLE_ACCELERATOR_PLUGIN_PATH;

LoadedPlugin& loaded() {
  static LoadedPlugin plugin(g_plugin_path);
  return plugin;
}
const tsrp_plugin* api() { return loaded().table; }

std::string take(tsrp_status* s) {
  if (!s) return "";
  std::string m = s->message.empty() ? "(empty message)" : s->message;
  delete s;
  return m;
}

tsrp_status_code take_code(tsrp_status* s, std::string* message) {
  if (!s) return TSRP_OK;
  const tsrp_status_code code = s->code;
  *message = take(s);
  return code;
}

std::pair<int64_t, int64_t> live() {
  int64_t count = -1, bytes = -1;
  loaded().live(&count, &bytes);
  return {count, bytes};
}

/// Every test starts with the plug-in loaded and ends with nothing left on the device.
class ExampleAccelerator : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(api(), nullptr) << loaded().error;
    unsetenv("EXAMPLE_ACCELERATOR_FAIL");
  }
  void TearDown() override {
    unsetenv("EXAMPLE_ACCELERATOR_FAIL");
    EXPECT_EQ(live(), std::make_pair(int64_t{0}, int64_t{0})) << "device allocations left alive";
  }
};

struct Backend {
  Backend() {
    tsrp_backend_options options{sizeof(tsrp_backend_options), 1};
    error = take(api()->create_backend(&options, &handle));
    space = handle ? api()->memory_space(handle) : nullptr;
  }
  ~Backend() {
    if (handle) api()->destroy_backend(handle);
  }
  tsrp_backend* handle = nullptr;
  const tsrp_memory_space* space = nullptr;
  std::string error;
};

/// A float32 tensor in the device's memory.
struct DeviceTensor {
  DeviceTensor(const tsrp_memory_space* s, std::vector<int64_t> d) : space(s), dims(std::move(d)) {
    error = take(space->allocate(space->context, bytes(), &data));
  }
  ~DeviceTensor() {
    if (data) space->deallocate(space->context, data);
  }
  size_t bytes() const { return static_cast<size_t>(element_count(dims)) * sizeof(float); }
  DLTensor dl() {
    DLTensor t{};
    t.data = data;
    t.device = {kDLExtDev, 0};
    t.ndim = static_cast<int32_t>(dims.size());
    t.dtype = {kDLFloat, 32, 1};
    t.shape = dims.data();
    return t;
  }
  std::string upload(const std::vector<float>& host) {
    return take(space->copy_from_host(space->context, data, host.data(), bytes()));
  }
  std::vector<float> download() {
    std::vector<float> host(element_count(dims), std::nanf(""));
    error = take(space->copy_to_host(space->context, host.data(), data, bytes()));
    return host;
  }
  const tsrp_memory_space* space;
  std::vector<int64_t> dims;
  void* data = nullptr;
  std::string error;
};

std::vector<uint8_t> compile_bytes(const Backend& b, const tsrp_graph* g, std::string* error) {
  tsrp_payload payload{sizeof(tsrp_payload), nullptr, 0, nullptr};
  *error = take(api()->compile(b.handle, g, &payload));
  if (!error->empty()) return {};
  const uint8_t* p = static_cast<const uint8_t*>(payload.data);
  std::vector<uint8_t> bytes(p, p + payload.size);
  api()->free_payload(b.handle, payload.owner);
  return bytes;
}

struct Region {
  Region(const Backend& b, const tsrp_graph* g, const std::vector<uint8_t>& payload) {
    status = api()->load(b.handle, g, payload.data(), payload.size(), &handle);
  }
  ~Region() {
    if (handle) api()->release_region(handle);
    take(status);
  }
  tsrp_region* handle = nullptr;
  tsrp_status* status = nullptr;
};

struct NodeTimes {
  std::vector<size_t> nodes;
};
extern "C" void record_node(void* context, size_t node, double milliseconds) {
  EXPECT_GE(milliseconds, 0.0);
  static_cast<NodeTimes*>(context)->nodes.push_back(node);
}

/// Runs a loaded region as the host does: inputs copied in, outputs copied out.
std::vector<std::vector<float>> run_loaded(const Backend& b, const tsrp_graph* g, tsrp_region* region,
                                           const std::vector<std::vector<float>>& inputs, std::string* error,
                                           NodeTimes* times = nullptr) {
  std::vector<std::unique_ptr<DeviceTensor>> in, out;
  std::vector<DLTensor> in_dl, out_dl;
  for (size_t k = 0; k < g->input_count; ++k) {
    const tsrp_value* v = g->values[g->inputs[k]];
    in.push_back(std::make_unique<DeviceTensor>(b.space, std::vector<int64_t>(v->dims, v->dims + v->rank)));
    *error = in.back()->error + in.back()->upload(inputs.at(k));
    if (!error->empty()) return {};
    in_dl.push_back(in.back()->dl());
  }
  for (size_t k = 0; k < g->output_count; ++k) {
    const tsrp_value* v = g->values[g->outputs[k]];
    out.push_back(std::make_unique<DeviceTensor>(b.space, std::vector<int64_t>(v->dims, v->dims + v->rank)));
    out_dl.push_back(out.back()->dl());
  }
  tsrp_run_args args{};
  args.struct_size = sizeof(args);
  args.input_count = in_dl.size();
  args.inputs = in_dl.data();
  args.output_count = out_dl.size();
  args.outputs = out_dl.data();
  args.host_context = times;
  args.node_finished = times ? &record_node : nullptr;
  *error = take(api()->run(region, &args));
  if (!error->empty()) return {};
  std::vector<std::vector<float>> results;
  for (auto& t : out) {
    results.push_back(t->download());
    if (!t->error.empty()) *error = t->error;
  }
  return results;
}

/// compile → load → run. Empty on failure, with `error` set.
std::vector<std::vector<float>> run_graph(const tsrp_graph* g, const std::vector<std::vector<float>>& inputs,
                                          std::string* error, NodeTimes* times = nullptr) {
  Backend b;
  *error = b.error;
  if (!error->empty()) return {};
  std::vector<uint8_t> payload = compile_bytes(b, g, error);
  if (!error->empty()) return {};
  Region region(b, g, payload);
  *error = take(region.status);
  region.status = nullptr;
  if (!error->empty()) return {};
  return run_loaded(b, g, region.handle, inputs, error, times);
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tolerance = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
    if (!(std::fabs(got[i] - want[i]) <= tolerance * (1.0f + std::fabs(want[i])))) {
      if (++bad <= 5) ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

std::string refusal(const tsrp_graph* g, size_t node) {
  Backend b;
  char reason[512] = "unchanged";
  tsrp_support out{sizeof(tsrp_support), -1, reason, sizeof(reason)};
  EXPECT_EQ(take(api()->support(b.handle, g, node, &out)), "");
  return out.supported ? std::string() : std::string(reason);
}

// ---------------------------------------------------------------- the table and the entry point

TEST_F(ExampleAccelerator, DescribesItselfAndRefusesAnotherMajorVersion) {
  EXPECT_STREQ(api()->name, "example_accelerator");
  EXPECT_STREQ(api()->version, "1");
  EXPECT_EQ(api()->abi_major, static_cast<uint32_t>(TSRP_ABI_MAJOR));
  EXPECT_EQ(api()->struct_size, sizeof(tsrp_plugin));
  EXPECT_EQ(loaded().entry(test_host(TSRP_ABI_MAJOR + 1)), nullptr);
  EXPECT_EQ(loaded().entry(nullptr), nullptr);
  Backend b;
  ASSERT_EQ(b.error, "");
  ASSERT_NE(b.space, nullptr);
  EXPECT_STREQ(b.space->name, "example-accelerator");
  EXPECT_NE(std::string(api()->compatibility(b.handle)), "");
}

// ---------------------------------------------------------------- ops against the references

TEST_F(ExampleAccelerator, ReluAndSigmoid) {
  for (const char* op : {"Relu", "Sigmoid"}) {
    RegionBuilder r;
    const int x = r.input("x", {2, 3, 5});
    const int y = r.value("y", {2, 3, 5});
    r.node(op, {x}, {y});
    r.output(y);
    std::vector<float> in = random_values(30, 1, -6, 6);
    in[0] = 0.0f;
    in[1] = std::nanf("");  // propagates, as in numpy
    in[2] = -INFINITY;
    in[3] = INFINITY;
    std::string error;
    auto out = run_graph(r.graph(), {in}, &error);
    ASSERT_EQ(error, "") << op;
    expect_near(out.at(0), std::string(op) == "Relu" ? reference_relu(in) : reference_sigmoid(in));
  }
}

TEST_F(ExampleAccelerator, AddAndMulBroadcast) {
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {3, 1}}, {{4}, {2, 3, 4}}, {{2, 1, 4}, {3, 1}}, {{}, {3, 2}}, {{5, 1}, {}}};
  for (const char* op : {"Add", "Mul"}) {
    for (const auto& [da, db] : shapes) {
      std::vector<float> a = random_values(element_count(da), 2), b = random_values(element_count(db), 3);
      std::vector<int64_t> dout;
      const std::vector<float> want = reference_binary(a, da, b, db, std::string(op) == "Mul", &dout);
      RegionBuilder r;
      const int va = r.input("a", da), vb = r.input("b", db), vy = r.value("y", dout);
      r.node(op, {va, vb}, {vy});
      r.output(vy);
      std::string error;
      auto out = run_graph(r.graph(), {a, b}, &error);
      ASSERT_EQ(error, "") << op;
      expect_near(out.at(0), want);
    }
  }
}

TEST_F(ExampleAccelerator, MatMulWithAConstantWeight) {
  const int64_t m = 3, k = 5, n = 4;
  std::vector<float> a = random_values(m * k, 4), w = random_values(k * n, 5);
  RegionBuilder r;
  const int va = r.input("a", {m, k}), vw = r.constant("w", {k, n}, w), vy = r.value("y", {m, n});
  r.node("MatMul", {va, vw}, {vy});
  r.output(vy);
  std::string error;
  auto out = run_graph(r.graph(), {a}, &error);
  ASSERT_EQ(error, "");
  expect_near(out.at(0), reference_matmul(a, w, m, k, n));
}

TEST_F(ExampleAccelerator, GemmWithAndWithoutTransBAndBias) {
  const int64_t m = 4, k = 3, n = 5;
  for (int trans_b : {0, 1}) {
    for (int bias_rank : {-1, 0, 1, 2}) {
      std::vector<float> a = random_values(m * k, 6), b = random_values(k * n, 7);
      std::vector<int64_t> dc = bias_rank == 0 ? std::vector<int64_t>{} : bias_rank == 1 ? std::vector<int64_t>{n}
                                                                                          : std::vector<int64_t>{m, 1};
      std::vector<float> c = random_values(element_count(dc), 8);
      RegionBuilder r;
      const int va = r.input("a", {m, k});
      const int vb = r.input("b", trans_b ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
      const int vc = bias_rank >= 0 ? r.input("c", dc) : -1;
      const int vy = r.value("y", {m, n});
      r.node("Gemm", bias_rank >= 0 ? std::vector<int>{va, vb, vc} : std::vector<int>{va, vb}, {vy});
      r.attr_int("transB", trans_b);
      r.attr_float("alpha", 1.0f);
      r.output(vy);
      std::vector<float> want = reference_matmul(a, b, m, k, n, trans_b);
      if (bias_rank >= 0) want = reference_binary(want, {m, n}, c, dc, false);
      std::string error;
      auto out = run_graph(r.graph(), bias_rank >= 0 ? std::vector<std::vector<float>>{a, b, c}
                                                     : std::vector<std::vector<float>>{a, b},
                           &error);
      ASSERT_EQ(error, "") << "transB " << trans_b << " bias rank " << bias_rank;
      expect_near(out.at(0), want);
    }
  }
}

/// A region of MatMulAddRelu composites as the host makes them (op Composite,
/// domain tessera, attributes pattern and body), the bias on either side of the Add.
TEST_F(ExampleAccelerator, FusedMatMulAddReluAsOneKernel) {
  const int64_t m = 3, k = 4, n = 6;
  for (bool bias_first : {false, true}) {
    RegionBuilder body;
    const int bx = body.input("x", {m, k}), bw = body.input("w", {k, n}), bb = body.input("b", {n});
    const int bp = body.value("p", {m, n}), bs = body.value("s", {m, n}), by = body.value("y", {m, n});
    body.node("MatMul", {bx, bw}, {bp});
    body.node("Add", bias_first ? std::vector<int>{bb, bp} : std::vector<int>{bp, bb}, {bs});
    body.node("Relu", {bs}, {by});
    body.output(by);
    std::vector<float> x = random_values(m * k, 9), w = random_values(k * n, 10), bias = random_values(n, 11);
    x[k] = std::nanf("");  // row 1 of the product is NaN, and stays so through Relu
    RegionBuilder r;
    // The composite's inputs in the body's order, which need not be (x, w, b): here (b, x, w).
    const int vb = r.input("b", {n}), vx = r.input("x", {m, k}), vw = r.constant("w", {k, n}, w);
    const int vy = r.value("y", {m, n}), vz = r.value("z", {m, n});
    body.set_inputs({bb, bx, bw});
    const tsrp_graph* body_graph = body.graph();
    r.node("Composite", {vb, vx, vw}, {vy}, "tessera");
    r.attr_string("pattern", "MatMulAddRelu");
    r.attr_graph("body", body_graph);
    r.node("Sigmoid", {vy}, {vz});
    r.output(vz);
    const std::vector<float> want =
        reference_sigmoid(reference_relu(reference_binary(reference_matmul(x, w, m, k, n), {m, n}, bias, {n}, false)));
    std::string error;
    NodeTimes times;
    auto out = run_graph(r.graph(), {bias, x}, &error, &times);
    ASSERT_EQ(error, "");
    expect_near(out.at(0), want);
    EXPECT_EQ(times.nodes, (std::vector<size_t>{0, 1})) << "one time per region node, the composite as one";
  }
}

/// A chain with intermediates, an output that later nodes also read, and a graph input read twice.
TEST_F(ExampleAccelerator, ChainWithIntermediatesAndSeveralOutputs) {
  const int64_t m = 2, k = 3, n = 3;
  std::vector<float> x = random_values(m * k, 12), w = random_values(k * n, 13);
  RegionBuilder r;
  const int vx = r.input("x", {m, k}), vw = r.constant("w", {k, n}, w);
  const int p = r.value("p", {m, n}), s = r.value("s", {m, n}), y = r.value("y", {m, n}), z = r.value("z", {m, n});
  r.node("MatMul", {vx, vw}, {p});
  r.node("Mul", {p, p}, {s});
  r.node("Sigmoid", {s}, {y});
  r.node("Add", {y, vx}, {z});  // x is [2,3] like y: read twice
  r.output(z);
  r.output(y);
  std::vector<float> pw = reference_matmul(x, w, m, k, n);
  std::vector<float> want_y = reference_sigmoid(reference_binary(pw, {m, n}, pw, {m, n}, true));
  std::vector<float> want_z = reference_binary(want_y, {m, n}, x, {m, k}, false);
  std::string error;
  NodeTimes times;
  auto out = run_graph(r.graph(), {x}, &error, &times);
  ASSERT_EQ(error, "");
  expect_near(out.at(0), want_z);
  expect_near(out.at(1), want_y);
  EXPECT_EQ(times.nodes.size(), 4u);
}

TEST_F(ExampleAccelerator, ConcurrentRunsOfOneRegion) {
  const int64_t m = 8, k = 16, n = 8;
  std::vector<float> w = random_values(k * n, 14);
  RegionBuilder r;
  const int vx = r.input("x", {m, k}), vw = r.constant("w", {k, n}, w), y = r.value("y", {m, n});
  const int z = r.value("z", {m, n});
  r.node("MatMul", {vx, vw}, {y});
  r.node("Relu", {y}, {z});
  r.output(z);
  const tsrp_graph* g = r.graph();
  Backend b;
  std::string error;
  std::vector<uint8_t> payload = compile_bytes(b, g, &error);
  ASSERT_EQ(error, "");
  Region region(b, g, payload);
  ASSERT_EQ(region.status, nullptr);
  std::vector<std::thread> threads;
  std::vector<std::string> errors(6);
  std::vector<int> wrong(6, 0);
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 5; ++repeat) {
        std::vector<float> x = random_values(m * k, 100 + t * 10 + repeat);
        auto out = run_loaded(b, g, region.handle, {x}, &errors[t]);
        if (!errors[t].empty()) return;
        const std::vector<float> want = reference_relu(reference_matmul(x, w, m, k, n));
        for (size_t i = 0; i < want.size(); ++i) wrong[t] += std::fabs(out[0][i] - want[i]) > 1e-4f;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 6; ++t) {
    EXPECT_EQ(errors[t], "");
    EXPECT_EQ(wrong[t], 0) << "thread " << t;
  }
}

// ---------------------------------------------------------------- the memory space

TEST_F(ExampleAccelerator, DeviceMemoryIsNotHostReadableAndCopiesAreStaged) {
  Backend b;
  DeviceTensor t(b.space, {4});
  ASSERT_EQ(t.error, "");
  std::vector<float> host = {1.0f, -2.0f, 3.5f, 0.25f};
  ASSERT_EQ(t.upload(host), "");
  // The host may reuse its buffer as soon as copy_from_host returns.
  std::vector<float> reused = host;
  host.assign(4, 99.0f);
  EXPECT_EQ(t.download(), reused);
  // The device's bytes are not the host's.
  EXPECT_EQ(take(b.space->synchronize(b.space->context)), "");
  EXPECT_NE(std::memcmp(t.data, reused.data(), t.bytes()), 0);
  EXPECT_EQ(live(), std::make_pair(int64_t{1}, int64_t{16}));
}

TEST_F(ExampleAccelerator, PointersTheDeviceDidNotAllocateAreRefused) {
  Backend b;
  std::vector<float> host(4, 1.0f), back(4);
  std::string message;
  EXPECT_EQ(take_code(b.space->copy_from_host(b.space->context, host.data(), back.data(), 16), &message), TSRP_INTERNAL);
  EXPECT_NE(message.find("is not memory this device allocated"), std::string::npos) << message;
  EXPECT_EQ(take_code(b.space->copy_to_host(b.space->context, back.data(), host.data(), 16), &message), TSRP_INTERNAL);
  DeviceTensor t(b.space, {4});
  // Past the end of a live allocation.
  EXPECT_EQ(take_code(b.space->copy_to_host(b.space->context, back.data(), static_cast<uint8_t*>(t.data) + 8, 16),
                      &message),
            TSRP_INTERNAL);
  EXPECT_EQ(take_code(b.space->copy_from_host(b.space->context, t.data, host.data(), 20), &message), TSRP_INTERNAL);
  // A region run with a host pointer in a device tensor, or a host tensor.
  RegionBuilder r;
  const int x = r.input("x", {4}), y = r.value("y", {4});
  r.node("Relu", {x}, {y});
  r.output(y);
  const tsrp_graph* g = r.graph();
  std::string error;
  std::vector<uint8_t> payload = compile_bytes(b, g, &error);
  Region region(b, g, payload);
  ASSERT_EQ(region.status, nullptr);
  DeviceTensor out(b.space, {4});
  DLTensor in_dl = t.dl(), out_dl = out.dl();
  in_dl.data = host.data();
  tsrp_run_args args{};
  args.struct_size = sizeof(args);
  args.input_count = 1;
  args.inputs = &in_dl;
  args.output_count = 1;
  args.outputs = &out_dl;
  EXPECT_EQ(take_code(api()->run(region.handle, &args), &message), TSRP_INTERNAL);
  EXPECT_NE(message.find("input 0 ('x')"), std::string::npos) << message;
  in_dl = t.dl();
  in_dl.device = {kDLCPU, 0};
  EXPECT_EQ(take_code(api()->run(region.handle, &args), &message), TSRP_INVALID_ARGUMENT);
  EXPECT_NE(message.find("device type"), std::string::npos) << message;
  in_dl = t.dl();
  int64_t wrong_shape[] = {5};
  in_dl.shape = wrong_shape;
  EXPECT_EQ(take_code(api()->run(region.handle, &args), &message), TSRP_INVALID_ARGUMENT);
  in_dl = t.dl();
  args.input_count = 2;
  EXPECT_EQ(take_code(api()->run(region.handle, &args), &message), TSRP_INVALID_ARGUMENT);
}

// ---------------------------------------------------------------- support and patterns

TEST_F(ExampleAccelerator, RefusalsNameTheOpTheValueAndItsType) {
  RegionBuilder r;
  const int i64 = r.input("x", {2, 3}, TSRP_INT64), f = r.input("f", {2, 3}), dyn = r.input("d", {-1, 3});
  const int unknown = r.value("u", {}, TSRP_FLOAT32, -1), r3 = r.input("r3", {2, 3, 3});
  const int w = r.input("w", {3, 3}), out = r.value("o", {2, 3}), out3 = r.value("o3", {2, 3, 3});
  r.node("Relu", {i64}, {r.value("o64", {2, 3}, TSRP_INT64)});
  r.node("Conv", {f, w}, {out});
  r.node("Relu", {dyn}, {r.value("od", {-1, 3})});
  r.node("Sigmoid", {unknown}, {r.value("ou", {}, TSRP_FLOAT32, -1)});
  r.node("MatMul", {r3, w}, {out3});
  r.node("Gemm", {f, w}, {out});
  r.attr_float("alpha", 2.0f);
  r.node("Gemm", {f, w}, {out});
  r.attr_int("transA", 1);
  r.node("Relu", {f}, {out}, "com.vendor");
  r.node("Relu", {f}, {out});
  const tsrp_graph* g = r.graph();
  EXPECT_EQ(refusal(g, 0), "example_accelerator: input 'x' is int64; only float32");
  EXPECT_EQ(refusal(g, 1), "example_accelerator: op Conv is not implemented on this device");
  EXPECT_EQ(refusal(g, 2), "example_accelerator: input 'd' has a dimension known only at run time; only static shapes");
  EXPECT_EQ(refusal(g, 3), "example_accelerator: input 'u' has an unknown rank; only static shapes");
  EXPECT_EQ(refusal(g, 4), "example_accelerator: MatMul input 'r3' has rank 3; only rank 2");
  EXPECT_EQ(refusal(g, 5), "example_accelerator: Gemm with alpha 2 and beta 1 is not implemented; only 1 and 1");
  EXPECT_EQ(refusal(g, 6), "example_accelerator: Gemm with transA = 1 is not implemented; only transB");
  EXPECT_EQ(refusal(g, 7), "example_accelerator: op com.vendor.Relu is not implemented on this device");
  EXPECT_EQ(refusal(g, 8), "");
  // A reason longer than the host's buffer is cut, NUL-terminated.
  Backend b;
  char tiny[8];
  tsrp_support answer{sizeof(tsrp_support), -1, tiny, sizeof tiny};
  ASSERT_EQ(take(api()->support(b.handle, g, 1, &answer)), "");
  EXPECT_EQ(answer.supported, 0);
  EXPECT_EQ(std::string(tiny), "example");
}

TEST_F(ExampleAccelerator, MatMulAddReluPatternAsData) {
  Backend b;
  ASSERT_EQ(api()->pattern_count(b.handle), 1u);
  const tsrp_pattern* p = api()->pattern(b.handle, 0);
  ASSERT_NE(p, nullptr);
  EXPECT_STREQ(p->name, "MatMulAddRelu");
  ASSERT_LT(static_cast<size_t>(p->root), p->node_count);
  const tsrp_pattern_node* root = p->nodes[p->root];
  EXPECT_EQ(root->kind, TSRP_PATTERN_OP);
  EXPECT_STREQ(root->op_types, "Relu");
  EXPECT_TRUE(root->flags & TSRP_PATTERN_SUPPORTED);
  // pattern_check on the Add: the MatMul's product must have the Add's shape.
  RegionBuilder r;
  const int x = r.input("x", {2, 3}), w = r.input("w", {3, 4}), bias = r.input("b", {4}), big = r.input("big", {5, 2, 4});
  const int prod = r.value("p", {2, 4}), s = r.value("s", {2, 4}), s_big = r.value("sb", {5, 2, 4});
  r.node("MatMul", {x, w}, {prod});
  const int good = r.node("Add", {bias, prod}, {s});
  const int bad = r.node("Add", {prod, big}, {s_big});
  const tsrp_graph* g = r.graph();
  size_t add_entry = p->node_count;
  for (size_t i = 0; i < p->node_count; ++i) {
    if (p->nodes[i]->kind == TSRP_PATTERN_OP && std::string(p->nodes[i]->op_types) == "Add") add_entry = i;
  }
  ASSERT_LT(add_entry, p->node_count);
  EXPECT_TRUE(p->nodes[add_entry]->flags & TSRP_PATTERN_CHECKED);
  EXPECT_NE(api()->pattern_check(b.handle, g, 0, add_entry, good), 0);
  EXPECT_EQ(api()->pattern_check(b.handle, g, 0, add_entry, bad), 0);
}

// ---------------------------------------------------------------- hostile payloads

/// A region and its valid payload, to corrupt.
struct Victim {
  Victim() {
    const int vx = r.input("x", {2, 3}), vw = r.constant("w", {3, 4}, random_values(12, 15));
    const int bias = r.input("b", {4}), p = r.value("p", {2, 4}), y = r.value("y", {2, 4});
    r.node("Gemm", {vx, vw, bias}, {p});
    r.node("Relu", {p}, {y});
    r.output(y);
    g = r.graph();
    std::string error;
    payload = compile_bytes(b, g, &error);
    EXPECT_EQ(error, "");
  }
  /// The load of `bytes`: its code, and the message in `message`.
  tsrp_status_code load(const std::vector<uint8_t>& bytes, std::string* message) {
    tsrp_region* region = nullptr;
    const tsrp_status_code code = take_code(api()->load(b.handle, g, bytes.data(), bytes.size(), &region), message);
    if (region) {
      // Accepted: it must run (on whatever it decoded) without harm.
      std::string error;
      run_loaded(b, g, region, {random_values(6, 1), random_values(4, 2)}, &error);
      api()->release_region(region);
    }
    return code;
  }
  Backend b;
  RegionBuilder r;
  const tsrp_graph* g = nullptr;
  std::vector<uint8_t> payload;
};

void expect_bad_payload(Victim& v, const std::vector<uint8_t>& bytes, const std::string& want) {
  std::string message;
  EXPECT_EQ(v.load(bytes, &message), TSRP_INVALID_ARGUMENT) << want;
  EXPECT_EQ(message.rfind("example_accelerator payload: ", 0), 0u) << message;
  EXPECT_NE(message.find(want), std::string::npos) << message;
}

TEST_F(ExampleAccelerator, TruncatedPayloadsAreRefused) {
  Victim v;
  std::string message;
  ASSERT_EQ(v.load(v.payload, &message), TSRP_OK) << message;
  for (size_t size = 0; size < v.payload.size(); ++size) {
    std::vector<uint8_t> cut(v.payload.begin(), v.payload.begin() + size);
    EXPECT_EQ(v.load(cut, &message), TSRP_INVALID_ARGUMENT) << "cut to " << size << " bytes";
  }
  std::vector<uint8_t> longer = v.payload;
  longer.push_back(0);
  expect_bad_payload(v, longer, "1 bytes after the last instruction");
}

TEST_F(ExampleAccelerator, PayloadFieldsAreCheckedAgainstTheRegion) {
  Victim v;
  auto patched = [&](size_t offset, uint32_t value) {
    std::vector<uint8_t> bytes = v.payload;
    for (int i = 0; i < 4; ++i) bytes.at(offset + i) = static_cast<uint8_t>(value >> (8 * i));
    return bytes;
  };
  // Header: magic, version, value count, node count, instruction count. Then the Gemm:
  // opcode @20, node @24, inputs @28, outputs @32, x @36, w @40, b @44, p @48, params @52, trans_b @56.
  expect_bad_payload(v, patched(0, 0x12345678), "not a device program");
  expect_bad_payload(v, patched(4, 2), "program version 2");
  expect_bad_payload(v, patched(8, 99), "compiled for a region of 99 values");
  expect_bad_payload(v, patched(16, 1000000), "instructions do not fit");
  expect_bad_payload(v, patched(20, 42), "unknown opcode 42");
  expect_bad_payload(v, patched(20, 7), "MatMulAddRelu for node 'n0_Gemm', which is Gemm");
  expect_bad_payload(v, patched(24, 7), "node 7 of a region of 2 nodes");
  expect_bad_payload(v, patched(28, 9), "Gemm with 9 inputs");
  expect_bad_payload(v, patched(36, 999), "value index 999");
  expect_bad_payload(v, patched(36, 0xFFFFFFFFu), "value index -1");
  expect_bad_payload(v, patched(36, 4), "reads value 4 before anything writes it");
  expect_bad_payload(v, patched(40, 2), "a matrix product of ranks 2 and 1");
  expect_bad_payload(v, patched(48, 0), "does not produce");
  expect_bad_payload(v, patched(52, 3), "3 parameters");
  expect_bad_payload(v, patched(56, 5), "trans_b 5");
  // The Relu dropped (count 1, the bytes cut after the Gemm's 44): nothing writes the region's output.
  std::vector<uint8_t> dropped = patched(16, 1);
  dropped.resize(20 + 44);
  expect_bad_payload(v, dropped, "no instruction writes region output 4");
  // A payload of another region.
  RegionBuilder other;
  const int x = other.input("x", {2, 3}), y = other.value("y", {2, 3});
  other.node("Relu", {x}, {y});
  other.output(y);
  std::string error;
  std::vector<uint8_t> foreign = compile_bytes(v.b, other.graph(), &error);
  expect_bad_payload(v, foreign, "compiled for a region of");
}

TEST_F(ExampleAccelerator, RandomAndFlippedPayloadsNeverCrash) {
  Victim v;
  std::string message;
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int round = 0; round < 300; ++round) {
    std::vector<uint8_t> bytes(next() % 128);
    for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(next() >> 24);
    if (round % 2 && bytes.size() >= 4) std::memcpy(bytes.data(), "EAPG", 4);  // past the magic check
    EXPECT_NE(v.load(bytes, &message), TSRP_OK);
  }
  // Every single-byte change of a valid payload: refused or still safe to run.
  for (size_t i = 0; i < v.payload.size(); ++i) {
    for (uint8_t flip : {0x01, 0x80, 0xFF}) {
      std::vector<uint8_t> bytes = v.payload;
      bytes[i] ^= flip;
      const tsrp_status_code code = v.load(bytes, &message);
      EXPECT_TRUE(code == TSRP_OK || code == TSRP_INVALID_ARGUMENT) << "byte " << i;
    }
  }
  EXPECT_NE(v.load({}, &message), TSRP_OK);
}

// ---------------------------------------------------------------- injected failures

TEST_F(ExampleAccelerator, InjectedFailuresLeakNothing) {
  RegionBuilder r;
  const int x = r.input("x", {2, 3}), w = r.constant("w", {3, 3}, random_values(9, 16));
  const int p = r.value("p", {2, 3}), y = r.value("y", {2, 3});
  r.node("MatMul", {x, w}, {p});
  r.node("Sigmoid", {p}, {y});
  r.output(y);
  const tsrp_graph* g = r.graph();
  for (const char* step : {"compile", "load", "run", "allocate"}) {
    setenv("EXAMPLE_ACCELERATOR_FAIL", step, 1);
    std::string error;
    auto out = run_graph(g, {random_values(6, 17)}, &error);
    EXPECT_TRUE(out.empty());
    EXPECT_EQ(error, std::string("example_accelerator: injected failure in ") + step);
    unsetenv("EXAMPLE_ACCELERATOR_FAIL");
    EXPECT_EQ(live(), std::make_pair(int64_t{0}, int64_t{0})) << step;
  }
  // Allocation failing inside load (the constants) and inside run (the intermediates).
  Backend b;
  std::string error;
  std::vector<uint8_t> payload = compile_bytes(b, g, &error);
  setenv("EXAMPLE_ACCELERATOR_FAIL", "allocate", 1);
  {
    Region region(b, g, payload);
    std::string message;
    EXPECT_EQ(take_code(region.status, &message), TSRP_INTERNAL);
    region.status = nullptr;
    EXPECT_EQ(message, "example_accelerator: injected failure in allocate");
    EXPECT_EQ(region.handle, nullptr);
  }
  unsetenv("EXAMPLE_ACCELERATOR_FAIL");
  Region region(b, g, payload);
  ASSERT_EQ(region.status, nullptr);
  DeviceTensor in(b.space, {2, 3}), out(b.space, {2, 3});
  ASSERT_EQ(in.upload(random_values(6, 18)), "");
  DLTensor in_dl = in.dl(), out_dl = out.dl();
  tsrp_run_args args{};
  args.struct_size = sizeof(args);
  args.input_count = 1;
  args.inputs = &in_dl;
  args.output_count = 1;
  args.outputs = &out_dl;
  const auto before = live();
  setenv("EXAMPLE_ACCELERATOR_FAIL", "allocate", 1);
  EXPECT_EQ(take(api()->run(region.handle, &args)), "example_accelerator: injected failure in allocate");
  unsetenv("EXAMPLE_ACCELERATOR_FAIL");
  EXPECT_EQ(live(), before);
  EXPECT_EQ(take(api()->run(region.handle, &args)), "");
}

}  // namespace
}  // namespace example_accelerator_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) example_accelerator_test::g_plugin_path = argv[1];
  return RUN_ALL_TESTS();
}
