// The test backend against the backend contract: what its declarations
// claim and refuse (with reasons), how its patterns match, its payload (round
// trip and hostile bytes), its memory space (scrambling, no leaks), profiling
// and concurrent runs.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <thread>

#include "backends/test_backend_helpers.h"
#include "backends/testing/test_backend.h"
#include "backends/testing/test_backend_internal.h"
#include "ir/error.h"
#include "partition/declarations.h"
#include "partition/pattern.h"
#include "unit/expect_error.h"

namespace tessera::testing {
namespace {

SupportDecision decide(const Graph& graph, size_t node_index = 0) {
  static const std::unique_ptr<Backend> backend = make_test_backend();
  return backend->declarations().supports(graph, graph.nodes[node_index]);
}

void expect_refused(const SupportDecision& decision, const std::vector<std::string>& words) {
  EXPECT_FALSE(decision.supported);
  EXPECT_EQ(decision.reason.rfind("test backend: ", 0), 0u) << decision.reason;
  for (const std::string& word : words) EXPECT_NE(decision.reason.find(word), std::string::npos) << decision.reason;
}

TEST(TestBackendContract, NamesVersionAndMemorySpace) {
  std::unique_ptr<Backend> backend = make_test_backend();
  EXPECT_EQ(backend->name(), "test");
  EXPECT_EQ(backend->version(), "1");
  EXPECT_EQ(backend->compatibility(), "test-device/1");
  ASSERT_NE(backend->memory_space(), nullptr);
  EXPECT_EQ(backend->memory_space()->name(), "test-device");
  EXPECT_EQ(backend->memory_space(), &test_device_memory_space());
}

TEST(TestBackendDeclarations, ClaimsStaticFloat32AndRefusesTheRestWithReasons) {
  GraphBuilder ok;
  ok.node("Relu", {ok.input("x", {2, 3})}, {2, 3});
  EXPECT_TRUE(decide(ok.graph()).supported) << decide(ok.graph()).reason;

  GraphBuilder int64;
  int64.node("Relu", {int64.input("x", {2, 3}, DType::kInt64)}, {2, 3}, {}, DType::kInt64);
  expect_refused(decide(int64.graph()), {"'x'", "int64", "only float32"});

  GraphBuilder dynamic;
  dynamic.node("Add", {dynamic.input("a", {2, 3}), dynamic.input("b", {-1, 3})}, {2, 3});
  expect_refused(decide(dynamic.graph()), {"'b'", "dynamic shape"});

  GraphBuilder old_softmax;
  old_softmax.node("Softmax", {old_softmax.input("x", {2, 3})}, {2, 3});
  old_softmax.graph().nodes[0].opset = 11;
  expect_refused(decide(old_softmax.graph()), {"Softmax", "opset 11", "13"});
  old_softmax.graph().nodes[0].opset = 13;
  EXPECT_TRUE(decide(old_softmax.graph()).supported);

  GraphBuilder vector_matmul;
  vector_matmul.node("MatMul", {vector_matmul.input("a", {2, 3}), vector_matmul.input("v", {3})}, {2});
  expect_refused(decide(vector_matmul.graph()), {"'v'", "1-D"});

  GraphBuilder runtime_shape;
  runtime_shape.node("Reshape", {runtime_shape.input("x", {2, 3}), runtime_shape.input("s", {1}, DType::kInt64)},
                     {6});
  expect_refused(decide(runtime_shape.graph()), {"constant shape"});
  GraphBuilder constant_shape;
  const ValueId constant_x = constant_shape.input("x", {2, 3});
  constant_shape.node("Reshape", {constant_x, constant_shape.constant("s", int64_tensor({1}, {6}))}, {6});
  EXPECT_TRUE(decide(constant_shape.graph()).supported) << decide(constant_shape.graph()).reason;

  // Erf is claimed only inside the Gelu pattern, never alone.
  GraphBuilder erf;
  erf.node("Erf", {erf.input("x", {4})}, {4});
  EXPECT_FALSE(decide(erf.graph()).supported);
  GraphBuilder conv;
  conv.node("Conv", {conv.input("x", {1, 1, 4, 4}), conv.input("w", {1, 1, 3, 3})}, {1, 1, 2, 2});
  EXPECT_FALSE(decide(conv.graph()).supported);
}

TEST(TestBackendDeclarations, PatternsAreDeclaredLargestFirst) {
  std::unique_ptr<Backend> backend = make_test_backend();
  std::vector<std::string> names;
  for (const DeclaredPattern& p : backend->declarations().patterns()) names.push_back(p.name);
  EXPECT_EQ(names, (std::vector<std::string>{"MatMulBiasGelu", "MatMulBiasRelu", "MatMulBias", "Gelu", "AddRelu"}));
}

// --- match_pattern on hand-built graphs ---

const Pattern& declared(const std::string& name) {
  static const std::unique_ptr<Backend> backend = make_test_backend();
  for (const DeclaredPattern& p : backend->declarations().patterns()) {
    if (p.name == name) return p.root;
  }
  throw std::runtime_error("no pattern " + name);
}

/// x → Div → Erf → Add → Mul → Mul, operands in PyTorch's order or swapped.
struct GeluNodes {
  GraphBuilder builder;
  ValueId x = kNoValue, erf = kNoValue, root = kNoValue;
};

void build_gelu(GeluNodes& g, bool swapped, float divisor = 1.41421356f) {
  GraphBuilder& b = g.builder;
  const Shape shape = {4};
  g.x = b.input("x", shape);
  const ValueId sqrt2 = b.constant("sqrt2", float_tensor({}, {divisor}));
  const ValueId one = b.constant("one", float_tensor({}, {1.0f}));
  const ValueId half = b.constant("half", float_tensor({1}, {0.5f}));
  const ValueId divided = b.node("Div", {g.x, sqrt2}, shape);
  g.erf = b.node("Erf", {divided}, shape);
  const ValueId plus_one = swapped ? b.node("Add", {one, g.erf}, shape) : b.node("Add", {g.erf, one}, shape);
  const ValueId times_x = swapped ? b.node("Mul", {plus_one, g.x}, shape) : b.node("Mul", {g.x, plus_one}, shape);
  g.root = swapped ? b.node("Mul", {half, times_x}, shape) : b.node("Mul", {times_x, half}, shape);
}

std::optional<PatternMatch> match_at_last(const std::string& pattern, const Graph& graph) {
  GraphUses uses(graph);
  return match_pattern(declared(pattern), graph, uses, graph.nodes.size() - 1);
}

TEST(TestBackendPatterns, GeluMatchesInBothOperandOrders) {
  for (bool swapped : {false, true}) {
    GeluNodes g;
    build_gelu(g, swapped);
    g.builder.output(g.root);
    std::optional<PatternMatch> match = match_at_last("Gelu", g.builder.graph());
    ASSERT_TRUE(match) << (swapped ? "swapped" : "PyTorch order");
    EXPECT_EQ(match->nodes, (std::vector<size_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(match->root, 4u);
  }
}

TEST(TestBackendPatterns, GeluRefusesWrongConstantsEscapingIntermediatesAndOutputs) {
  {
    GeluNodes g;
    build_gelu(g, false, /*divisor=*/1.5f);
    g.builder.output(g.root);
    EXPECT_FALSE(match_at_last("Gelu", g.builder.graph()));
  }
  {
    // The Erf's output is also read by a node outside the pattern.
    GeluNodes g;
    build_gelu(g, false);
    g.builder.output(g.root);
    g.builder.output(g.builder.node("Neg", {g.erf}, {4}));
    GraphUses uses(g.builder.graph());
    EXPECT_FALSE(match_pattern(declared("Gelu"), g.builder.graph(), uses, 4));
  }
  {
    // The Erf's output is a graph output.
    GeluNodes g;
    build_gelu(g, true);
    g.builder.output(g.root);
    g.builder.output(g.erf);
    EXPECT_FALSE(match_at_last("Gelu", g.builder.graph()));
  }
  {
    // x = the Div's input must be the same value the Mul reads.
    GeluNodes g;
    build_gelu(g, false);
    Graph& graph = g.builder.graph();
    const ValueId other = graph.add_value("other", TensorType::make(DType::kFloat32, {4}));
    graph.inputs.push_back(other);
    graph.nodes[3].inputs[0] = other;  // Mul(other, plus_one)
    g.builder.output(g.root);
    EXPECT_FALSE(match_at_last("Gelu", graph));
  }
}

TEST(TestBackendPatterns, MatMulBiasFamilyNeedsConstantWeightAndBias) {
  auto build = [](bool constant_weight, bool relu) {
    GraphBuilder b;
    const ValueId x = b.input("x", {2, 4});
    const ValueId w = constant_weight ? b.constant("w", random_tensor({4, 3}, 1)) : b.input("w", {4, 3});
    const ValueId bias = b.constant("bias", random_tensor({3}, 2));
    const ValueId product = b.node("MatMul", {x, w}, {2, 3});
    ValueId out = b.node("Add", {bias, product}, {2, 3});
    if (relu) out = b.node("Relu", {out}, {2, 3});
    b.output(out);
    return b.graph();
  };
  const Graph with_relu = build(true, true);
  std::optional<PatternMatch> match = match_at_last("MatMulBiasRelu", with_relu);
  ASSERT_TRUE(match);
  EXPECT_EQ(match->nodes.size(), 3u);
  EXPECT_FALSE(match_at_last("MatMulBiasGelu", with_relu));
  EXPECT_TRUE(match_at_last("MatMulBias", build(true, false)));
  EXPECT_FALSE(match_at_last("MatMulBias", build(false, false)));
  EXPECT_FALSE(match_at_last("MatMulBiasRelu", build(false, true)));
  // A plain Add + Relu of the same graph is an AddRelu.
  EXPECT_TRUE(match_at_last("AddRelu", build(false, true)));
}

// --- payload ---

/// x → MatMulBiasRelu composite → Softmax → Transpose → output (three instructions, constants, attributes).
Graph small_region() {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 4});
  const ValueId w = b.constant("w", random_tensor({4, 3}, 30));
  const ValueId bias = b.constant("bias", random_tensor({3}, 31));
  const ValueId product = b.node("MatMul", {x, w}, {2, 3});
  const ValueId biased = b.node("Add", {product, bias}, {2, 3});
  const ValueId relu = b.node("Relu", {biased}, {2, 3});
  const ValueId soft = b.node("Softmax", {relu}, {2, 3});
  AttributeMap perm;
  perm.set("perm", Attribute::of_ints({1, 0}));
  b.output(b.node("Transpose", {soft}, {3, 2}, perm));
  return make_composite(b.graph(), {0, 1, 2}, "MatMulBiasRelu");
}

TEST(TestBackendPayload, RoundTripsAndLoadsToTheSameResults) {
  const Graph region = small_region();
  std::unique_ptr<Backend> backend = make_test_backend();
  CompiledRegion compiled = backend->compile(region, RegionOptions{});
  const test_backend::Program program = test_backend::parse_program(compiled.payload);
  ASSERT_EQ(program.instructions.size(), 3u);
  EXPECT_EQ(program.instructions[0].opcode, test_backend::Opcode::kMatMulBiasRelu);
  EXPECT_EQ(program.instructions[0].inputs.size(), 3u);
  EXPECT_EQ(program.instructions[1].opcode, test_backend::Opcode::kSoftmax);
  EXPECT_EQ(program.instructions[1].ints, std::vector<int64_t>{1});  // axis -1 of a rank-2 input
  EXPECT_EQ(program.instructions[2].ints, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(test_backend::serialize_program(program), compiled.payload);

  std::unique_ptr<ExecutableRegion> loaded = backend->load(region, compiled.payload, RegionOptions{});
  const std::vector<Tensor> inputs = {random_tensor({2, 4}, 32)};
  MemorySpace& space = *backend->memory_space();
  std::vector<Tensor> from_compile = run_on_device(*compiled.executable, region, space, inputs);
  std::vector<Tensor> from_load = run_on_device(*loaded, region, space, inputs);
  expect_near_tensor(from_load[0], from_compile[0], 0, 0);
}

TEST(TestBackendPayload, PayloadForAnotherRegionIsAUserError) {
  std::unique_ptr<Backend> backend = make_test_backend();
  CompiledRegion compiled = backend->compile(small_region(), RegionOptions{});
  GraphBuilder other;
  other.output(other.node("Relu", {other.input("x", {2})}, {2}));
  EXPECT_USER_ERROR(backend->load(other.graph(), compiled.payload, RegionOptions{}), "test backend payload: ");
}

/// Loads `payload`; a refusal must be a user error naming the payload, and a
/// payload that loads must run without crashing. Returns whether it loaded.
bool load_and_run_if_accepted(const Backend& backend, const Graph& region, const std::vector<uint8_t>& payload) {
  std::unique_ptr<ExecutableRegion> executable;
  try {
    executable = backend.load(region, payload, RegionOptions{});
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUser) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("test backend payload: ", 0), 0u) << e.what();
    return false;
  }
  run_on_device(*executable, region, *backend.memory_space(), {random_tensor({2, 4}, 33)});
  return true;
}

TEST(TestBackendPayload, EveryTruncationIsACleanUserError) {
  const Graph region = small_region();
  std::unique_ptr<Backend> backend = make_test_backend();
  const std::vector<uint8_t> payload = backend->compile(region, RegionOptions{}).payload;
  const int64_t live_before = test_device_stats().live_allocations;
  for (size_t size = 0; size < payload.size(); ++size) {
    SCOPED_TRACE("truncated to " + std::to_string(size) + " bytes");
    const std::vector<uint8_t> truncated(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(size));
    EXPECT_FALSE(load_and_run_if_accepted(*backend, region, truncated));
  }
  std::vector<uint8_t> longer = payload;
  longer.push_back(0);
  EXPECT_FALSE(load_and_run_if_accepted(*backend, region, longer));
  EXPECT_EQ(test_device_stats().live_allocations, live_before);
}

TEST(TestBackendPayload, EveryFlippedByteIsRefusedOrStillRunsSafely) {
  const Graph region = small_region();
  std::unique_ptr<Backend> backend = make_test_backend();
  const std::vector<uint8_t> payload = backend->compile(region, RegionOptions{}).payload;
  const int64_t live_before = test_device_stats().live_allocations;
  size_t refused = 0, accepted = 0;
  for (size_t i = 0; i < payload.size(); ++i) {
    for (uint8_t mask : {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF}) {
      SCOPED_TRACE("byte " + std::to_string(i) + " ^ " + std::to_string(mask));
      std::vector<uint8_t> flipped = payload;
      flipped[i] ^= mask;
      (load_and_run_if_accepted(*backend, region, flipped) ? accepted : refused)++;
    }
  }
  // Most flips hit structure (ids, counts, opcodes) and are refused; a few
  // still make a valid program (e.g. another Softmax axis) and must run safely.
  EXPECT_GT(refused, accepted);
  EXPECT_GT(accepted, 0u);
  EXPECT_EQ(test_device_stats().live_allocations, live_before);
}

TEST(TestBackendPayload, GarbageIsAUserError) {
  const Graph region = small_region();
  std::unique_ptr<Backend> backend = make_test_backend();
  std::vector<uint8_t> garbage(300);
  uint32_t state = 7;
  for (int round = 0; round < 50; ++round) {
    for (uint8_t& byte : garbage) byte = static_cast<uint8_t>((state = state * 1664525u + 1013904223u) >> 24);
    if (round % 2 == 0) std::memcpy(garbage.data(), "TSTB\x01\0\0\0", 8);  // past the magic and version
    EXPECT_FALSE(load_and_run_if_accepted(*backend, region, garbage));
  }
}

// --- memory space ---

TEST(TestBackendMemory, DeviceBytesAreScrambledAndCopiesRoundTrip) {
  MemorySpace& space = test_device_memory_space();
  const TestDeviceStats before = test_device_stats();
  const Tensor host = random_tensor({64}, 40);
  void* device = space.allocate(host.nbytes());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(device) % 64, 0u);
  EXPECT_EQ(test_device_stats().live_allocations, before.live_allocations + 1);
  EXPECT_EQ(test_device_stats().live_bytes, before.live_bytes + static_cast<int64_t>(host.nbytes()));
  space.copy_from_host(device, host.data(), host.nbytes());
  const uint8_t* raw = static_cast<const uint8_t*>(device);
  const uint8_t* plain = static_cast<const uint8_t*>(host.data());
  for (size_t i = 0; i < host.nbytes(); ++i) ASSERT_EQ(raw[i], plain[i] ^ 0xA5) << "byte " << i;
  Tensor back(DType::kFloat32, {64});
  space.copy_to_host(back.data(), device, back.nbytes());
  expect_near_tensor(back, host, 0, 0);
  space.deallocate(device);
  space.deallocate(space.allocate(0));  // zero bytes is a valid allocation
  EXPECT_EQ(test_device_stats().live_allocations, before.live_allocations);
  EXPECT_EQ(test_device_stats().live_bytes, before.live_bytes);
}

TEST(TestBackendMemory, HostMemoryHandedOverWithoutACopyGivesWrongResults) {
  GraphBuilder b;
  const ValueId x = b.input("x", {8});
  b.output(b.node("Neg", {x}, {8}));
  std::unique_ptr<Backend> backend = make_test_backend();
  CompiledRegion compiled = backend->compile(b.graph(), RegionOptions{});
  const Tensor input = random_tensor({8}, 41);
  DeviceStore store(b.graph(), *backend->memory_space(), {input});
  store.hand_host_memory_for_input(0, input);
  compiled.executable->run(store);
  const Tensor result = store.read(b.graph().outputs[0]);
  int differing = 0;
  for (int i = 0; i < 8; ++i) differing += result.as<float>()[i] != -input.as<float>()[i];
  EXPECT_EQ(differing, 8);
}

TEST(TestBackendMemory, ConstantsLiveOnTheDeviceUntilTheRegionIsDestroyed) {
  const TestDeviceStats before = test_device_stats();
  std::unique_ptr<Backend> backend = make_test_backend();
  CompiledRegion compiled = backend->compile(small_region(), RegionOptions{});
  // Weight (4x3) and bias (3) copied once, at load.
  EXPECT_EQ(test_device_stats().live_allocations, before.live_allocations + 2);
  EXPECT_EQ(test_device_stats().live_bytes, before.live_bytes + 15 * 4);
  compiled.executable.reset();
  EXPECT_EQ(test_device_stats().live_allocations, before.live_allocations);
  EXPECT_EQ(test_device_stats().live_bytes, before.live_bytes);
}

// --- running ---

TEST(TestBackendRun, ReportsEveryNodeWhenProfiling) {
  const Graph region = small_region();
  std::unique_ptr<Backend> backend = make_test_backend();
  CompiledRegion compiled = backend->compile(region, RegionOptions{});
  DeviceStore store(region, *backend->memory_space(), {random_tensor({2, 4}, 50)});
  compiled.executable->run(store);
  EXPECT_TRUE(store.finished_.empty());
  store.profiling_ = true;
  compiled.executable->run(store);
  EXPECT_EQ(store.finished_, (std::vector<size_t>{0, 1, 2}));
}

TEST(TestBackendRun, ConcurrentRunsOfOneRegionAgree) {
  const Graph region = small_region();
  std::unique_ptr<Backend> backend = make_test_backend();
  CompiledRegion compiled = backend->compile(region, RegionOptions{});
  std::vector<Tensor> inputs, expected;
  for (uint32_t t = 0; t < 4; ++t) {
    inputs.push_back(random_tensor({2, 4}, 60 + t));
    expected.push_back(run_on_device(*compiled.executable, region, *backend->memory_space(), {inputs[t]})[0]);
  }
  std::vector<Tensor> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 50; ++repeat) {
        results[t] = run_on_device(*compiled.executable, region, *backend->memory_space(), {inputs[t]})[0];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t t = 0; t < 4; ++t) expect_near_tensor(results[t], expected[t], 0, 0);
}

TEST(TestBackendRun, WrongViewFromTheRuntimeIsAnInternalError) {
  GraphBuilder b;
  const ValueId x = b.input("x", {8});
  b.output(b.node("Relu", {x}, {8}));
  std::unique_ptr<Backend> backend = make_test_backend();
  CompiledRegion compiled = backend->compile(b.graph(), RegionOptions{});
  DeviceStore store(b.graph(), *backend->memory_space(), {random_tensor({8}, 70)});
  const_cast<TensorView&>(store.get(x)).shape = {4};
  EXPECT_INTERNAL_ERROR(compiled.executable->run(store), "'x'");
}

}  // namespace
}  // namespace tessera::testing
