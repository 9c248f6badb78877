// Partitioning through the real runtime, with the test backend (whose memory
// is scrambled, so a missing or misplaced copy gives wrong numbers) beside
// native: random graphs under random placement policies must give the
// native-only outputs, copies must happen exactly where memory spaces differ,
// device memory must not leak, and .tsr artifacts must run like the model
// they were saved from (and refuse edited or hostile contents with a user
// error). Native-only results are the reference: they are checked against
// ONNX and PyTorch by the conformance and model tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unistd.h>
#include <vector>

#include "artifact/artifact.h"
#include "backends/testing/test_backend.h"
#include "ir/error.h"
#include "ir/op_schema.h"
#include "runtime/session.h"
#include "graph_builder.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

namespace fs = std::filesystem;

/// Ops the test backend claims on their own (float32, static shapes).
const std::set<std::string> kTestClaims = {"Relu", "Sigmoid", "Tanh", "Neg", "Abs", "Exp", "Add", "Sub", "Mul",
                                           "Div", "MatMul", "Gemm", "Softmax", "Transpose", "Reshape", "Flatten"};
/// Unary ops with no attribute the test backend always claims (safe to --place on it).
const std::vector<std::string> kClaimedUnary = {"Relu", "Sigmoid", "Tanh", "Neg", "Abs"};

/// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("tessera_partition_runtime_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

using Builder = GraphBuilder;

/// |actual - expected| <= 1e-6 + 1e-5 |expected| element by element. The
/// absolute part covers outputs near 0 after cancellation, which random graphs
/// produce (the largest difference seen was 2e-7 there, 1e-6 at values near 4);
/// a bound relative to the tensor's largest value let small elements be far off.
void expect_same_numbers(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  int failures = 0;
  for (int64_t i = 0; i < actual.numel() && failures < 5; ++i) {
    const double a = actual.double_at(i), b = expected.double_at(i);
    if ((std::isnan(a) && std::isnan(b)) || a == b) continue;
    if (!(std::fabs(a - b) <= 1e-6 + 1e-5 * std::fabs(b))) {
      ADD_FAILURE() << what << " element " << i << ": got " << a << ", expected " << b;
      ++failures;
    }
  }
}

void expect_identical(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(), actual.nbytes()), 0) << what << " differs";
}

std::vector<TensorView> views_of(const std::vector<Tensor>& tensors) {
  std::vector<TensorView> views;
  for (const Tensor& t : tensors) views.push_back(t.view());
  return views;
}

std::unique_ptr<CompiledModel> compile_with(const Graph& graph, std::vector<std::string> backends) {
  CompileOptions options;
  options.backends = std::move(backends);
  return CompiledModel::compile(graph, options);
}

// ---------------------------------------------------------------------------
// Random graphs.

bool broadcasts(const Shape& a, const Shape& b, Shape* out) {
  const size_t rank = std::max(a.size(), b.size());
  Shape result(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    result[i] = std::max(da, db);
  }
  if (out) *out = result;
  return true;
}

struct RandomGraph {
  Graph graph;
  std::vector<Tensor> feeds;
  std::vector<std::string> live_nodes;          // names of nodes that reach an output
  std::vector<std::string> live_claimed_unary;  // live nodes of kClaimedUnary ops
  std::set<std::string> live_op_types;
};

/// A random DAG of about `target_nodes` nodes mixing ops the test backend
/// claims (alone or in its patterns) with ops only native runs, over
/// broadcasting shapes, constants, 1-3 inputs and 1-4 outputs (intermediates
/// read later, graph inputs passed straight through).
class RandomGraphMaker {
 public:
  explicit RandomGraphMaker(uint32_t seed) : rng_(seed) {}

  RandomGraph make(int target_nodes) {
    const std::vector<Shape> input_shapes = {{2, 3, 4}, {3, 4}, {4}, {1, 3, 1}, {2, 1, 4}, {3, 1}};
    const int inputs = 1 + pick(3);
    for (int i = 0; i < inputs; ++i) {
      Shape shape = i == 0 ? Shape{2, 3, 4} : input_shapes[pick(input_shapes.size())];
      add_value(b_.input("x" + std::to_string(i), shape), shape, true);
      result_.feeds.push_back(random_float(shape, rng_()));
    }
    while (static_cast<int>(b_.graph.nodes.size()) < target_nodes) add_random_node();
    choose_outputs();
    result_.graph = b_.graph;
    return result_;
  }

 private:
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }

  void add_value(ValueId id, Shape shape, bool exact) {
    shapes_[id] = std::move(shape);
    exact_[id] = exact;
    computed_.push_back(id);
  }
  /// A non-constant value, usually a recent one (long chains), sometimes any.
  ValueId operand() {
    const size_t n = computed_.size();
    if (chance(0.7)) return computed_[n - 1 - pick(std::min<size_t>(n, 5))];
    return computed_[pick(n)];
  }
  ValueId constant(const Shape& shape, float low, float high) {
    Tensor t = random_float(shape, rng_());
    for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = low + (high - low) * (t.as<float>()[i] + 1) / 2;
    const ValueId id = b_.constant(t);
    shapes_[id] = shape;
    exact_[id] = true;
    return id;
  }
  /// A constant or computed value that broadcasts with `shape`.
  ValueId partner(const Shape& shape) {
    if (chance(0.6)) {
      for (int tries = 0; tries < 6; ++tries) {
        const ValueId other = operand();
        if (broadcasts(shape, shapes_[other], nullptr)) return other;
      }
    }
    std::vector<Shape> options = {shape, {}};
    if (!shape.empty()) options.push_back({shape.back()});
    return constant(options[pick(options.size())], -1, 1);
  }
  ValueId emit(const std::string& op, std::vector<ValueId> inputs, Shape shape, AttributeMap attrs = {}) {
    bool exact = false;
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Neg" || op == "Abs" || op == "Relu" || op == "Floor" ||
        op == "Transpose" || op == "Reshape" || op == "Flatten") {
      exact = true;
      for (ValueId in : inputs) exact &= exact_[in];
    }
    const ValueId out = b_.node(op, std::move(inputs), std::move(attrs));
    add_value(out, std::move(shape), exact);
    return out;
  }

  void add_random_node() {
    const ValueId x = operand();
    const Shape shape = shapes_[x];
    switch (pick(14)) {
      case 0:
      case 1:
        emit(kClaimedUnary[pick(kClaimedUnary.size())], {x}, shape);
        break;
      case 2: {  // bounded, so Exp cannot overflow
        emit("Exp", {emit("Tanh", {x}, shape)}, shape);
        break;
      }
      case 3:
      case 4: {
        const ValueId other = partner(shape);
        Shape out;
        broadcasts(shape, shapes_[other], &out);
        const char* ops[] = {"Add", "Sub", "Mul"};
        emit(ops[pick(3)], chance(0.5) ? std::vector<ValueId>{x, other} : std::vector<ValueId>{other, x}, out);
        break;
      }
      case 5:  // divisors kept away from zero
        emit("Div", {x, constant(chance(0.5) ? Shape{} : Shape{shape.empty() ? 1 : shape.back()}, 0.5f, 2.0f)}, shape);
        break;
      case 6: {  // MatMul with constant weights, sometimes the MatMulBias(Relu) pattern
        if (shape.empty()) break;
        const int64_t k = shape.back();
        const ValueId product = emit("MatMul", {x, constant({k, k}, -1, 1)}, shape);
        if (chance(0.6)) {
          const ValueId biased = emit("Add", {product, constant({k}, -1, 1)}, shape);
          if (chance(0.5)) emit("Relu", {biased}, shape);
        }
        break;
      }
      case 7: {  // the erf form of GELU (Erf alone is native's; in the pattern, the test backend's)
        const ValueId divided = emit("Div", {x, b_.constant(make_float({}, {1.4142135f}))}, shape);
        const ValueId erf = emit("Erf", {divided}, shape);
        const ValueId plus_one = emit("Add", {erf, b_.constant(make_float({}, {1.0f}))}, shape);
        const ValueId times_x = emit("Mul", {x, plus_one}, shape);
        emit("Mul", {times_x, b_.constant(make_float({}, {0.5f}))}, shape);
        break;
      }
      case 8: {
        if (shape.size() != 2) break;
        const int64_t k = shape[1];
        emit("Gemm", {x, constant({k, k}, -1, 1), constant({k}, -1, 1)}, shape);
        break;
      }
      case 9:
        emit("Softmax", {x}, shape);
        break;
      case 10: {  // reshapes: Transpose, Reshape, Flatten
        if (shape.size() >= 2 && chance(0.4)) {
          std::vector<int64_t> perm(shape.size());
          for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
          std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
          Shape out = shape;
          std::swap(out[out.size() - 1], out[out.size() - 2]);
          AttributeMap attrs;
          attrs.set("perm", Attribute::of_ints(perm));
          emit("Transpose", {x}, out, attrs);
        } else if (shape.size() >= 2 && chance(0.5)) {
          const Shape out = {shape_numel(shape) / shape.back(), shape.back()};
          const ValueId target = b_.constant(make_int64({2}, {out[0], out[1]}));
          emit("Reshape", {x, target}, out);
        } else if (!shape.empty()) {
          emit("Flatten", {x}, {shape[0], shape_numel(shape) / shape[0]});
        }
        break;
      }
      case 11:
        emit(chance(0.5) ? "Erf" : "Sin", {x}, shape);
        break;
      case 12:
        emit("Sqrt", {emit("Abs", {x}, shape)}, shape);
        break;
      case 13:  // only on exactly computed values: a 1-ulp difference must not flip a Floor
        if (exact_[x]) emit("Floor", {x}, shape);
        break;
    }
  }

  void choose_outputs() {
    std::vector<ValueId>& outputs = b_.graph.outputs;
    auto add = [&](ValueId id) {
      if (std::find(outputs.begin(), outputs.end(), id) == outputs.end()) outputs.push_back(id);
    };
    add(computed_.back());
    const int extra = static_cast<int>(pick(3));
    for (int i = 0; i < extra; ++i) add(computed_[pick(computed_.size())]);  // often also read later
    if (chance(0.15)) add(b_.graph.inputs[pick(b_.graph.inputs.size())]);
    // Live nodes: those whose outputs reach a graph output.
    std::vector<char> needed(b_.graph.values.size(), 0);
    for (ValueId id : outputs) needed[static_cast<size_t>(id)] = 1;
    for (size_t n = b_.graph.nodes.size(); n-- > 0;) {
      const Node& node = b_.graph.nodes[n];
      if (!needed[static_cast<size_t>(node.outputs[0])]) continue;
      for (ValueId in : node.inputs) needed[static_cast<size_t>(in)] = 1;
      result_.live_nodes.push_back(node.name);
      result_.live_op_types.insert(node.op_type);
      if (std::find(kClaimedUnary.begin(), kClaimedUnary.end(), node.op_type) != kClaimedUnary.end()) {
        result_.live_claimed_unary.push_back(node.name);
      }
    }
  }

  std::mt19937 rng_;
  Builder b_;
  RandomGraph result_;
  std::map<ValueId, Shape> shapes_;
  std::map<ValueId, bool> exact_;
  std::vector<ValueId> computed_;  // graph inputs and node outputs
};

/// A random placement policy over the graph's live nodes: --place on native
/// or (for ops it always claims) on test, --deny test for some nodes or op
/// types (never one placed on test), a minimum region size of 1 to 3.
CompileOptions random_policy(const RandomGraph& g, std::mt19937& rng, std::set<std::string>* placed_on_test,
                             std::set<std::string>* denied) {
  CompileOptions options;
  options.backends = {"test", "native"};
  auto chance = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  auto pick = [&](const auto& items) { return items[std::uniform_int_distribution<size_t>(0, items.size() - 1)(rng)]; };
  options.min_region_size = chance(0.6) ? 1 : (chance(0.5) ? 2 : 3);
  std::set<std::string> placed;
  if (!g.live_claimed_unary.empty() && chance(0.2)) {
    const std::string name = pick(g.live_claimed_unary);
    options.place.emplace_back(name, "test");
    placed_on_test->insert(name);
    placed.insert(name);
  }
  if (!g.live_nodes.empty() && chance(0.3)) {
    const std::string name = pick(g.live_nodes);
    if (!placed.count(name)) options.place.emplace_back(name, "native");
  }
  if (!g.live_nodes.empty() && chance(0.3)) {
    const std::vector<std::string> types(g.live_op_types.begin(), g.live_op_types.end());
    const std::string type = pick(types);
    bool clashes = false;
    for (const std::string& name : *placed_on_test) clashes |= name.rfind(type + "_", 0) == 0;
    if (!clashes) {
      options.deny.emplace_back("test", "op:" + type);
      denied->insert("op:" + type);
    }
  }
  if (!g.live_nodes.empty() && chance(0.2)) {
    const std::string name = pick(g.live_nodes);
    if (!placed_on_test->count(name)) {
      options.deny.emplace_back("test", name);
      denied->insert(name);
    }
  }
  return options;
}

std::string describe_policy(const CompileOptions& options) {
  std::string text = "min_region_size " + std::to_string(options.min_region_size);
  for (const auto& [selector, backend] : options.place) text += ", place " + selector + "=" + backend;
  for (const auto& [backend, selector] : options.deny) text += ", deny " + backend + ":" + selector;
  return text;
}

TEST(PartitionRuntime, RandomGraphsMatchNativeUnderRandomPolicies) {
  TempDir dir;
  constexpr int kGraphs = 220;
  int graphs_using_test = 0;
  const int64_t baseline_allocations = test_device_stats().live_allocations;
  for (int index = 0; index < kGraphs; ++index) {
    const uint32_t seed = 1000u + static_cast<uint32_t>(index);
    std::mt19937 rng(seed);
    RandomGraph g = RandomGraphMaker(seed).make(1 + static_cast<int>(rng() % 40));
    std::set<std::string> placed_on_test, denied;
    CompileOptions options = random_policy(g, rng, &placed_on_test, &denied);
    SCOPED_TRACE("graph seed " + std::to_string(seed) + ", " + std::to_string(g.graph.nodes.size()) + " nodes, " +
                 describe_policy(options));
    const std::vector<TensorView> feeds = views_of(g.feeds);
    std::vector<Tensor> expected;
    try {
      expected = compile_with(g.graph, {"native"})->run(feeds);
    } catch (const Error& e) {
      FAIL() << "native-only: " << e.what();
    }
    std::unique_ptr<CompiledModel> model;
    try {
      model = CompiledModel::compile(g.graph, options);
    } catch (const Error& e) {
      FAIL() << "test,native: " << e.what();
    }
    const int64_t allocations_after_compile = test_device_stats().live_allocations;

    // Where nodes went agrees with what the test backend claims and with the policy.
    bool uses_test = false;
    std::map<int64_t, bool> region_has_placed_node;
    for (const NodePlacement& row : model->placement()) {
      if (row.backend == "folded") continue;
      ASSERT_TRUE(row.backend == "test" || row.backend == "native") << row.node_name << " on " << row.backend;
      if (row.backend != "test") {
        EXPECT_FALSE(placed_on_test.count(row.node_name)) << row.node_name << " was placed on test";
        continue;
      }
      uses_test = true;
      region_has_placed_node[row.region] |= placed_on_test.count(row.node_name) != 0;
      EXPECT_TRUE(kTestClaims.count(row.op_type) || (row.op_type == "Erf" && !row.note.empty()))
          << row.node_name << " (" << row.op_type << ") on test: " << row.note;
      EXPECT_FALSE(denied.count(row.node_name) || denied.count("op:" + row.op_type)) << row.node_name << " was denied";
    }
    for (const auto& [selector, backend] : options.place) {
      size_t rows = 0;  // the policy places live nodes by name: each has exactly one row
      for (const NodePlacement& row : model->placement()) {
        if (row.node_name == selector) {
          EXPECT_EQ(row.backend, backend) << selector;
          ++rows;
        }
      }
      EXPECT_EQ(rows, 1u) << selector;
    }
    for (size_t r = 0; r < model->regions().size(); ++r) {
      const RegionSummary& region = model->regions()[r];
      if (region.backend != "test") continue;
      EXPECT_EQ(region.memory_space, "test-device");
      if (!region_has_placed_node[static_cast<int64_t>(r)]) {
        EXPECT_GE(region.node_count, static_cast<size_t>(options.min_region_size)) << "region " << r;
      }
    }
    graphs_using_test += uses_test;

    // Runs: plain, profiled, into caller buffers; then through an artifact.
    RunProfile profile;
    std::vector<Tensor> actual = model->run(feeds, {}, &profile);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) expect_same_numbers(actual[i], expected[i], "output " + std::to_string(i));
    EXPECT_EQ(profile.copies, model->copies_per_run());
    EXPECT_EQ(profile.copy_bytes, model->copy_bytes_per_run());
    EXPECT_EQ(profile.node_milliseconds.size(), model->placement().size());
    EXPECT_EQ(profile.region_milliseconds.size(), model->regions().size());
    if (!uses_test) {
      EXPECT_EQ(model->copies_per_run(), 0);
    }
    EXPECT_EQ(test_device_stats().live_allocations, allocations_after_compile) << "device memory leaked by a run";

    std::vector<Tensor> buffers;
    std::vector<TensorView> buffer_views;
    for (const Tensor& t : expected) buffers.push_back(Tensor(t.dtype(), t.shape()));
    for (const Tensor& t : buffers) buffer_views.push_back(t.view());
    std::vector<TensorView*> destinations;
    for (TensorView& v : buffer_views) destinations.push_back(&v);
    model->run(feeds, destinations);
    for (size_t i = 0; i < buffers.size(); ++i) expect_identical(buffers[i], actual[i], "caller buffer " + std::to_string(i));

    const std::string path = dir.file("graph_" + std::to_string(index) + ".tsr");
    model->save(path);
    {
      std::unique_ptr<CompiledModel> loaded = CompiledModel::load(path, CompileOptions{});
      EXPECT_EQ(loaded->regions().size(), model->regions().size());
      EXPECT_EQ(loaded->copies_per_run(), model->copies_per_run());
      std::vector<Tensor> reloaded = loaded->run(feeds);
      ASSERT_EQ(reloaded.size(), actual.size());
      for (size_t i = 0; i < actual.size(); ++i) expect_identical(reloaded[i], actual[i], "artifact output " + std::to_string(i));
    }
    fs::remove(path);
    model.reset();
    EXPECT_EQ(test_device_stats().live_allocations, baseline_allocations) << "device memory outlived its model";
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Most graphs must really exercise the test backend, or this test proves little.
  EXPECT_GE(graphs_using_test, kGraphs * 6 / 10) << graphs_using_test << " of " << kGraphs << " graphs used 'test'";
}

// ---------------------------------------------------------------------------
// Copies between memory spaces, on hand-built graphs.

constexpr int64_t kBytes = 2 * 3 * 4 * 4;  // one float32[2x3x4]

struct CopyCase {
  std::unique_ptr<CompiledModel> model;
  RunProfile profile;
};

/// Compiles with {test, native}, runs profiled, checks the numbers against
/// native alone and the profile against the plan.
CopyCase run_copy_case(const Graph& graph, std::vector<std::string> backends = {"test", "native"}, bool strict = false) {
  const Tensor x = random_float({2, 3, 4}, 7);
  const std::vector<Tensor> expected = compile_with(graph, {"native"})->run({x.view()});
  CompileOptions options;
  options.backends = std::move(backends);
  options.strict = strict;
  CopyCase c;
  c.model = CompiledModel::compile(graph, options);
  const std::vector<Tensor> actual = c.model->run({x.view()}, {}, &c.profile);
  EXPECT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < std::min(actual.size(), expected.size()); ++i) {
    expect_same_numbers(actual[i], expected[i], "output " + std::to_string(i));
  }
  EXPECT_EQ(c.profile.copies, c.model->copies_per_run());
  EXPECT_EQ(c.profile.copy_bytes, c.model->copy_bytes_per_run());
  return c;
}

std::vector<std::string> region_backends(const CompiledModel& model) {
  std::vector<std::string> names;
  for (const RegionSummary& r : model.regions()) names.push_back(r.backend);
  return names;
}

using Names = std::vector<std::string>;

/// x → Relu (test) → a; Erf(a) (native) → b; Add(a, b) (test) → c; Sin(c) (native) → y.
Graph test_host_test_host() {
  Builder b;
  const ValueId x = b.input("x", {2, 3, 4});
  const ValueId a = b.node("Relu", {x});
  const ValueId e = b.node("Erf", {a});
  const ValueId c = b.node("Add", {a, e});
  b.graph.outputs = {b.node("Sin", {c})};
  return b.graph;
}

TEST(PartitionRuntime, ValueBetweenTwoTestRegionsStaysOnTheDevice) {
  CopyCase c = run_copy_case(test_host_test_host());
  const CompiledModel& m = *c.model;
  ASSERT_EQ(region_backends(m), (Names{"test", "native", "test", "native"}));
  // 'a' goes to the host once (for Erf) and stays resident for the second test region:
  // copies are x in, a out, Erf's output in, Add's output out.
  EXPECT_EQ(m.regions()[0].outputs, Names{"Relu_0_out"});
  EXPECT_EQ(m.regions()[2].inputs, (Names{"Relu_0_out", "Erf_1_out"}));
  EXPECT_EQ(m.copies_per_run(), 4);
  EXPECT_EQ(m.copy_bytes_per_run(), 4 * kBytes);
  EXPECT_EQ(c.profile.copies, 4);
}

TEST(PartitionRuntime, TestRegionIntermediatesAreNotCopied) {
  // x → Relu → Tanh (one test region) → Sin (native): x in, Tanh's output out; Relu's never leaves.
  Builder b;
  const ValueId x = b.input("x", {2, 3, 4});
  b.graph.outputs = {b.node("Sin", {b.node("Tanh", {b.node("Relu", {x})})})};
  CopyCase c = run_copy_case(b.graph);
  ASSERT_EQ(region_backends(*c.model), (Names{"test", "native"}));
  EXPECT_EQ(c.model->regions()[0].outputs, Names{"Tanh_1_out"});
  EXPECT_EQ(c.model->copies_per_run(), 2);
  EXPECT_EQ(c.model->copy_bytes_per_run(), 2 * kBytes);
}

TEST(PartitionRuntime, HostValueReadOnBothSidesIsCopiedOnceToTheDevice) {
  // b = Erf(x) is read by Sin (native) and Tanh (test); d = Sin(b) by Mul (test).
  // The native region runs first ({Erf, Sin}), then the test region {Tanh, Mul}:
  // b and d are copied in, Mul's output out; x, read only on the host, never moves.
  Builder b;
  const ValueId x = b.input("x", {2, 3, 4});
  const ValueId e = b.node("Erf", {x});
  const ValueId t = b.node("Tanh", {e});
  const ValueId s = b.node("Sin", {e});
  b.graph.outputs = {b.node("Mul", {t, s})};
  CopyCase c = run_copy_case(b.graph);
  ASSERT_EQ(region_backends(*c.model), (Names{"native", "test"}));
  EXPECT_EQ(c.model->regions()[1].inputs.size(), 2u);
  EXPECT_EQ(c.model->copies_per_run(), 3);
  EXPECT_EQ(c.model->copy_bytes_per_run(), 3 * kBytes);
}

TEST(PartitionRuntime, DeviceValueThatIsAnOutputAndReadLaterIsCopiedOutOnce) {
  // Relu's output is a graph output and read by Erf (native) and by Tanh (in the same test
  // region as Relu): copies are x in, Relu out (once, serving both), Tanh-side result out.
  Builder b;
  const ValueId x = b.input("x", {2, 3, 4});
  const ValueId r = b.node("Relu", {x});
  const ValueId t = b.node("Tanh", {r});
  const ValueId e = b.node("Erf", {r});
  b.graph.outputs = {r, b.node("Add", {t, e}), t};
  CopyCase c = run_copy_case(b.graph);
  // Regions: test {Relu, Tanh}, native {Erf}, test {Add}: x in, r out, t out (graph output;
  // resident for Add too), e in, Add out.
  ASSERT_EQ(region_backends(*c.model), (Names{"test", "native", "test"}));
  EXPECT_EQ(c.model->copies_per_run(), 5);
}

TEST(PartitionRuntime, HostOnlyModelsCopyNothing) {
  CopyCase native_only = run_copy_case(test_host_test_host(), {"native"});
  EXPECT_EQ(native_only.model->copies_per_run(), 0);
  EXPECT_EQ(native_only.profile.copies, 0);
  EXPECT_EQ(native_only.profile.copy_bytes, 0);
  // The test backend listed but denied everything: still nothing to copy.
  CompileOptions options;
  options.backends = {"test", "native"};
  options.deny = {{"test", "op:Relu"}, {"test", "op:Add"}};
  auto model = CompiledModel::compile(test_host_test_host(), options);
  EXPECT_EQ(region_backends(*model), Names{"native"});
  EXPECT_EQ(model->copies_per_run(), 0);
}

TEST(PartitionRuntime, EverythingOnTheTestBackend) {
  Builder b;
  const ValueId x = b.input("x", {2, 3, 4});
  b.graph.outputs = {b.node("Softmax", {b.node("Tanh", {b.node("Relu", {x})})})};
  CopyCase c = run_copy_case(b.graph, {"test"}, /*strict=*/true);
  EXPECT_EQ(region_backends(*c.model), Names{"test"});
  EXPECT_EQ(c.model->copies_per_run(), 2);
}

TEST(PartitionRuntime, EdgeShapesOnTheDevice) {
  // Scalars, zero-element tensors, a value listed twice as an output, and an
  // input that is both an output and read by the test backend.
  for (const Shape& shape : {Shape{}, Shape{0, 4}, Shape{1}, Shape{2, 3, 4}}) {
    SCOPED_TRACE("shape " + shape_to_string(shape));
    Builder b;
    const ValueId x = b.input("x", shape);
    const ValueId r = b.node("Relu", {b.node("Add", {x, x})});
    const ValueId e = b.node("Erf", {r});
    b.graph.outputs = {r, b.node("Mul", {e, r}), r, x};
    const Tensor input = random_float(shape, 4);
    const std::vector<Tensor> expected = compile_with(b.graph, {"native"})->run({input.view()});
    auto model = compile_with(b.graph, {"test", "native"});
    EXPECT_EQ(region_backends(*model), (Names{"test", "native", "test"}));
    RunProfile profile;
    const std::vector<Tensor> actual = model->run({input.view()}, {}, &profile);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) expect_identical(actual[i], expected[i], "output " + std::to_string(i));
    EXPECT_EQ(profile.copies, model->copies_per_run());
  }
}

TEST(PartitionRuntime, ConcurrentRunsWithDeviceRegions) {
  auto model = compile_with(test_host_test_host(), {"test", "native"});
  const int64_t allocations = test_device_stats().live_allocations;
  std::vector<Tensor> inputs, expected;
  for (uint32_t k = 0; k < 4; ++k) {
    inputs.push_back(random_float({2, 3, 4}, 100 + k));
    expected.push_back(model->run({inputs.back().view()})[0]);
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 2000; ++i) {
        const Tensor out = model->run({inputs[k].view()})[0];
        mismatches[k] += std::memcmp(out.data(), expected[k].data(), out.nbytes()) != 0;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches, (std::vector<int>{0, 0, 0, 0}));
  EXPECT_EQ(test_device_stats().live_allocations, allocations);
}

// ---------------------------------------------------------------------------
// Artifacts through CompiledModel.

/// Saves `model`, loads it back and checks the loaded model runs identically.
void expect_artifact_round_trip(const CompiledModel& model, const std::vector<Tensor>& inputs, const std::string& path) {
  model.save(path);
  std::unique_ptr<CompiledModel> loaded = CompiledModel::load(path, CompileOptions{});
  EXPECT_EQ(region_backends(*loaded), region_backends(model));
  EXPECT_EQ(loaded->copies_per_run(), model.copies_per_run());
  ASSERT_EQ(loaded->placement().size(), model.placement().size());
  for (size_t i = 0; i < model.placement().size(); ++i) {
    const NodePlacement& a = loaded->placement()[i];
    const NodePlacement& b = model.placement()[i];
    EXPECT_EQ(std::tie(a.node_name, a.op_type, a.backend, a.note, a.region, a.why),
              std::tie(b.node_name, b.op_type, b.backend, b.note, b.region, b.why))
        << "placement row " << i;
  }
  const std::vector<Tensor> expected = model.run(views_of(inputs));
  RunProfile profile;
  const std::vector<Tensor> actual = loaded->run(views_of(inputs), {}, &profile);
  EXPECT_EQ(profile.copies, model.copies_per_run());
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) expect_identical(actual[i], expected[i], "output " + std::to_string(i));
}

TEST(PartitionRuntimeArtifact, MixedPartitionRoundTrips) {
  TempDir dir;
  auto model = compile_with(test_host_test_host(), {"test", "native"});
  expect_artifact_round_trip(*model, {random_float({2, 3, 4}, 3)}, dir.file("mixed.tsr"));
}

TEST(PartitionRuntimeArtifact, AllOnTestBackendRoundTrips) {
  TempDir dir;
  Builder b;
  const ValueId x = b.input("x", {2, 3, 4});
  const ValueId product = b.node("MatMul", {x, b.constant(random_float({4, 4}, 5))});
  b.graph.outputs = {b.node("Relu", {b.node("Add", {product, b.constant(random_float({4}, 6))})})};
  CompileOptions options;
  options.backends = {"test"};
  options.strict = true;
  auto model = CompiledModel::compile(b.graph, options);
  ASSERT_EQ(region_backends(*model), Names{"test"});
  EXPECT_EQ(model->regions()[0].composites.size(), 1u);  // MatMulBiasRelu
  expect_artifact_round_trip(*model, {random_float({2, 3, 4}, 3)}, dir.file("all_test.tsr"));
}

TEST(PartitionRuntimeArtifact, GraphWithoutNodesRoundTrips) {
  TempDir dir;
  Builder b;
  const ValueId x = b.input("x", {2, 3, 4});
  b.graph.outputs = {x, b.constant(make_float({2}, {1.5f, -2.5f}))};
  auto model = compile_with(b.graph, {"test", "native"});
  EXPECT_TRUE(model->regions().empty());
  const Tensor input = random_float({2, 3, 4}, 9);
  const std::vector<Tensor> outputs = model->run({input.view()});
  ASSERT_EQ(outputs.size(), 2u);
  expect_identical(outputs[0], input, "passed-through input");
  expect_identical(outputs[1], make_float({2}, {1.5f, -2.5f}), "constant output");
  expect_artifact_round_trip(*model, {input}, dir.file("no_nodes.tsr"));
}

/// Loads `path` and expects a user error whose message contains every part.
void expect_load_user_error(const std::string& path, std::initializer_list<std::string> parts) {
  SCOPED_TRACE("loading " + path);
  for (const std::string& part : parts) EXPECT_USER_ERROR(CompiledModel::load(path, CompileOptions{}), part);
}

/// Saves the mixed model and returns its artifact as load_artifact reads it.
struct EditableArtifact {
  TempDir dir;
  std::string original;
  std::string edited;
  Artifact artifact;
  size_t test_region = 0;
  EditableArtifact() : original(dir.file("original.tsr")), edited(dir.file("edited.tsr")) {
    compile_with(test_host_test_host(), {"test", "native"})->save(original);
    artifact = load_artifact(original);
    while (artifact.regions[test_region].backend != "test") ++test_region;
  }
};

// A backend no build of Tessera has ("dnnl" may be built in, depending on the build).
TEST(PartitionRuntimeArtifact, RegionOfAMissingBackendIsNamed) {
  EditableArtifact a;
  for (std::string& name : a.artifact.backends) {
    if (name == "test") name = "acme_npu";
  }
  for (ArtifactRegion& region : a.artifact.regions) {
    if (region.backend == "test") region.backend = "acme_npu";
  }
  for (ArtifactPlacement& row : a.artifact.placement) {
    if (row.backend == "test") row.backend = "acme_npu";
  }
  save_artifact(a.edited, a.artifact);
  expect_load_user_error(a.edited, {"'acme_npu'", "neither built in nor loaded as a plug-in", "known: dnnl, test, native", "--backend-plugin"});
}

TEST(PartitionRuntimeArtifact, PayloadVersionAndCompatibilityMismatchesNameBoth) {
  {
    EditableArtifact a;
    a.artifact.regions[a.test_region].backend_version = "99";
    save_artifact(a.edited, a.artifact);
    expect_load_user_error(a.edited, {"99", "version 1"});
  }
  {
    EditableArtifact a;
    a.artifact.regions[a.test_region].compatibility = "test-device/7";
    save_artifact(a.edited, a.artifact);
    expect_load_user_error(a.edited, {"test-device/7", "test-device/1"});
  }
}

TEST(PartitionRuntimeArtifact, HostileTestPayloadsAreUserErrorsNeverCrashes) {
  EditableArtifact a;
  const std::vector<uint8_t> good(a.artifact.regions[a.test_region].payload.begin(),
                                  a.artifact.regions[a.test_region].payload.end());
  ASSERT_FALSE(good.empty());
  const Tensor x = random_float({2, 3, 4}, 1);
  auto try_payload = [&](const std::vector<uint8_t>& payload, const std::string& what) {
    SCOPED_TRACE(what);
    a.artifact.regions[a.test_region].payload = payload;
    save_artifact(a.edited, a.artifact);
    try {
      std::unique_ptr<CompiledModel> model = CompiledModel::load(a.edited, CompileOptions{});
      model->run({x.view()});  // a payload that passes every check must at least run
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUser) << e.what();
    }
  };
  for (size_t length = 0; length < good.size(); ++length) {
    try_payload(std::vector<uint8_t>(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(length)),
                "truncated to " + std::to_string(length));
  }
  for (size_t i = 0; i < good.size(); ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xFF}}) {
      std::vector<uint8_t> bad = good;
      bad[i] ^= flip;
      try_payload(bad, "byte " + std::to_string(i) + " xor " + std::to_string(flip));
    }
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  a.artifact.regions[a.test_region].payload = longer;
  save_artifact(a.edited, a.artifact);
  expect_load_user_error(a.edited, {"test backend payload"});
}

/// Moves region `r` of the artifact to `backend` (decisions and placement rows follow).
void relabel_region(Artifact& artifact, size_t r, const std::string& backend) {
  artifact.regions[r].backend = backend;
  const size_t index = static_cast<size_t>(
      std::find(artifact.backends.begin(), artifact.backends.end(), backend) - artifact.backends.begin());
  for (size_t node : artifact.regions[r].nodes) {
    artifact.decisions[node].backend = index;
    artifact.placement[node].backend = backend;
  }
}

/// Loads an edited artifact: it must be refused with a user error, or run
/// exactly like the original. A plan that loads but computes something else
/// would be the worst outcome.
void expect_refused_or_unchanged(const std::string& path, const Artifact& artifact, const std::string& original) {
  save_artifact(path, artifact);
  const Tensor x = random_float({2, 3, 4}, 12);
  const std::vector<Tensor> expected = CompiledModel::load(original, CompileOptions{})->run({x.view()});
  try {
    const std::vector<Tensor> actual = CompiledModel::load(path, CompileOptions{})->run({x.view()});
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < actual.size(); ++i) expect_identical(actual[i], expected[i], "output " + std::to_string(i));
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUser) << e.what();
  }
}

TEST(PartitionRuntimeArtifact, RegionsMovedBetweenBackendsAreRefusedOrRunTheSame) {
  {
    SCOPED_TRACE("test region relabelled native, keeping the test payload");
    EditableArtifact a;
    const ArtifactRegion& native_region = a.artifact.regions[a.test_region + 1];
    ASSERT_EQ(native_region.backend, "native");
    a.artifact.regions[a.test_region].backend_version = native_region.backend_version;
    a.artifact.regions[a.test_region].compatibility = native_region.compatibility;
    relabel_region(a.artifact, a.test_region, "native");
    expect_refused_or_unchanged(a.edited, a.artifact, a.original);
  }
  {
    SCOPED_TRACE("native region relabelled test, with another test region's payload");
    EditableArtifact a;
    const size_t native_region = a.test_region + 1;
    ASSERT_EQ(a.artifact.regions[native_region].backend, "native");
    a.artifact.regions[native_region].payload = a.artifact.regions[a.test_region].payload;
    a.artifact.regions[native_region].backend_version = a.artifact.regions[a.test_region].backend_version;
    a.artifact.regions[native_region].compatibility = a.artifact.regions[a.test_region].compatibility;
    relabel_region(a.artifact, native_region, "test");
    expect_refused_or_unchanged(a.edited, a.artifact, a.original);
  }
  {
    SCOPED_TRACE("the two test regions' payloads swapped");
    EditableArtifact a;
    std::vector<size_t> test_regions;
    for (size_t r = 0; r < a.artifact.regions.size(); ++r) {
      if (a.artifact.regions[r].backend == "test") test_regions.push_back(r);
    }
    ASSERT_EQ(test_regions.size(), 2u);
    std::swap(a.artifact.regions[test_regions[0]].payload, a.artifact.regions[test_regions[1]].payload);
    expect_refused_or_unchanged(a.edited, a.artifact, a.original);
  }
}

TEST(PartitionRuntimeArtifact, CompositesDroppedFromAFusedPayloadAreRefused) {
  TempDir dir;
  Builder b;
  const ValueId x = b.input("x", {2, 3, 4});
  const ValueId product = b.node("MatMul", {x, b.constant(random_float({4, 4}, 5))});
  b.graph.outputs = {b.node("Relu", {b.node("Add", {product, b.constant(random_float({4}, 6))})})};
  const std::string original = dir.file("fused.tsr"), edited = dir.file("unfused.tsr");
  compile_with(b.graph, {"test", "native"})->save(original);
  Artifact artifact = load_artifact(original);
  ASSERT_EQ(artifact.regions.size(), 1u);
  ASSERT_EQ(artifact.regions[0].composites.size(), 1u);
  artifact.regions[0].composites.clear();
  expect_refused_or_unchanged(edited, artifact, original);
}

TEST(PartitionRuntimeArtifact, PlanOptionsAreRefusedWhenLoading) {
  TempDir dir;
  const std::string path = dir.file("model.tsr");
  compile_with(test_host_test_host(), {"test", "native"})->save(path);
  CompileOptions with_backends;
  with_backends.backends = {"native"};
  CompileOptions with_shape;
  with_shape.input_shapes["x"] = {1, 3, 4};
  for (const CompileOptions& options : {with_backends, with_shape}) {
    EXPECT_USER_ERROR(CompiledModel::load(path, options), "compiled artifact");
  }
  CompileOptions threads;
  threads.num_threads = 2;
  EXPECT_NO_THROW(CompiledModel::load(path, threads));
}

}  // namespace
}  // namespace tessera::testing
