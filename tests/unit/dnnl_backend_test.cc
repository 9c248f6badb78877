// The oneDNN backend against the native one: one-op and small multi-op
// graphs over random shapes and attributes run with --backends dnnl,native
// and with native alone (the reference: native is checked against ONNX and
// PyTorch by the conformance and model tests), and must agree; each graph
// also asserts that dnnl really ran the ops it declares, so a declaration
// that silently stops claiming them fails here. Further: the fused patterns
// (Conv+BatchNorm+Add+Relu, MatMul+bias+GELU) become one composite, constants
// are reordered once (repeated runs and a saved-and-loaded artifact give
// identical bytes), and blocked layouts stay inside a region (counted on
// the lowered program through the backend's internal header).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <random>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include "ir/op_schema.h"
#include "partition/declarations.h"
#include "runtime/backend_registry.h"
#include "runtime/session.h"
#include "cpu_isa.h"
#include "graph_builder.h"
#include "test_util.h"

#include "backends/dnnl/dnnl_internal.h"

namespace tessera::testing {
namespace {


using Builder = GraphBuilder;

std::unique_ptr<CompiledModel> compile_on(const Graph& graph, std::vector<std::string> backends) {
  CompileOptions options;
  options.backends = std::move(backends);
  options.strict = options.backends.size() == 1;
  return CompiledModel::compile(graph, options);
}

std::vector<TensorView> views_of(const std::vector<Tensor>& tensors) {
  std::vector<TensorView> views;
  for (const Tensor& t : tensors) views.push_back(t.view());
  return views;
}

/// |dnnl - native| <= atol + rtol * |native|, element by element: a bound
/// relative to the whole tensor's largest value would let small elements
/// (a 1e-5 softmax probability) be wrong many times over.
struct Tolerance {
  double atol = 1e-6;  // single ops: oneDNN's exp, tanh and erf differ from libm in the last bits
  double rtol = 1e-5;
};
/// Ops that sum many products (Conv, MatMul, Gemm, ConvTranspose) in another
/// order than native: the absolute part covers outputs whose terms cancel.
constexpr Tolerance kSumsOfProducts{1e-5, 1e-4};
/// LogSoftmax: x - max - log(sum) near 0 (a probability near 1) keeps the
/// absolute error of its terms, not a relative one.
constexpr Tolerance kLogarithms{1e-5, 1e-5};
/// Data movement (Transpose, Concat, Slice, views): oneDNN's reorders copy bits.
constexpr Tolerance kExact{0, 0};

void expect_near(const Tensor& actual, const Tensor& expected, const std::string& what, Tolerance tolerance) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  int failures = 0;
  for (int64_t i = 0; i < actual.numel() && failures < 5; ++i) {
    const double a = actual.double_at(i), b = expected.double_at(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (!(std::fabs(a - b) <= tolerance.atol + tolerance.rtol * std::fabs(b))) {
      ADD_FAILURE() << what << " element " << i << ": dnnl gives " << a << ", native " << b << " (atol " << tolerance.atol
                    << ", rtol " << tolerance.rtol << ")";
      ++failures;
    }
  }
}

void expect_identical(const Tensor& actual, const Tensor& expected, const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(), actual.nbytes()), 0) << what << " differs";
}

/// Why the dnnl backend's declarations refuse node `name` of the compiled graph.
std::string dnnl_refusal(const CompiledModel& model, const std::string& name) {
  std::unique_ptr<Backend> dnnl = find_backend("dnnl")->make(RegionOptions{});
  for (const Node& node : model.graph().nodes) {
    if (node.name == name) return dnnl->declarations().supports(model.graph(), node).reason;
  }
  return "(node not found)";
}

/// Runs `graph` on dnnl+native and on native alone and compares. Every
/// executed node whose op type is in `on_dnnl` must have run on dnnl, and
/// every one in `on_native` on native (the declarations refuse it); each op
/// named must have run at least once, so neither check passes on nothing.
void expect_dnnl_matches_native(const Graph& graph, const std::vector<Tensor>& feeds, const std::set<std::string>& on_dnnl,
                                const std::string& what, Tolerance tolerance = {}, const std::set<std::string>& on_native = {}) {
  SCOPED_TRACE(what);
  std::unique_ptr<CompiledModel> reference = compile_on(graph, {"native"});
  std::unique_ptr<CompiledModel> model = compile_on(graph, {"dnnl", "native"});
  std::set<std::string> seen;
  for (const NodePlacement& p : model->placement()) {
    if (p.region < 0) continue;
    if (on_dnnl.count(p.op_type)) {
      seen.insert(p.op_type);
      // Below AVX2 (the capped SSE4.1 run) oneDNN has only reference kernels for some of these (LogSoftmax):
      // its slow-kernel guard refuses them when compiling, and native runs them.
      const bool refused_as_slow = p.why.find("dnnl refused it when compiling it: oneDNN has only its reference kernel") != std::string::npos;
      if (!(refused_as_slow && !cpu_isa::dnnl_avx2() && p.backend == "native")) {
        EXPECT_EQ(p.backend, "dnnl") << p.node_name << " (" << p.op_type << ") ran on " << p.backend << ": "
                                     << dnnl_refusal(*model, p.node_name) << p.why;
      }
    }
    if (on_native.count(p.op_type)) {
      seen.insert(p.op_type);
      EXPECT_EQ(p.backend, "native") << p.node_name << " (" << p.op_type << ") ran on " << p.backend << ": " << p.why;
    }
  }
  for (const std::string& op : on_dnnl) EXPECT_TRUE(seen.count(op)) << op << " did not run at all (folded away?)";
  for (const std::string& op : on_native) EXPECT_TRUE(seen.count(op)) << op << " did not run at all (folded away?)";
  const std::vector<Tensor> expected = reference->run(views_of(feeds));
  const std::vector<Tensor> actual = model->run(views_of(feeds));
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) expect_near(actual[i], expected[i], "output " + std::to_string(i), tolerance);
}

class Random {
 public:
  explicit Random(uint32_t seed) : rng_(seed) {}
  int64_t between(int64_t low, int64_t high) { return std::uniform_int_distribution<int64_t>(low, high)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  uint32_t seed() { return static_cast<uint32_t>(rng_()); }
  Tensor floats(Shape shape, float low = -1, float high = 1) {
    Tensor t = random_float(shape, seed());
    for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = low + (high - low) * (t.as<float>()[i] + 1) / 2;
    return t;
  }

 private:
  std::mt19937 rng_;
};

// ---------------------------------------------------------------------------
// Pooling.

TEST(DnnlBackend, PoolingMatchesNativeOnRandomWindows) {
  Random random(11);
  for (int trial = 0; trial < 40; ++trial) {
    const bool max = trial % 2 == 0;
    const size_t n = static_cast<size_t>(random.between(1, 3));
    Shape shape = {random.between(1, 2), random.between(1, 20)};
    std::vector<int64_t> kernel, strides, dilations, pads(2 * n);
    bool partial_last_window = false;
    const bool ceil_mode = random.chance(0.4);
    for (size_t i = 0; i < n; ++i) {
      kernel.push_back(random.between(1, 3));
      strides.push_back(random.between(1, 3));
      dilations.push_back(max ? random.between(1, 2) : 1);
      const int64_t extent = (kernel[i] - 1) * dilations[i] + 1;
      pads[i] = random.between(0, kernel[i] - 1);
      pads[n + i] = random.between(0, kernel[i] - 1);
      shape.push_back(random.between(extent, extent + 6));
      const int64_t span = shape.back() + pads[i] + pads[n + i] - extent;
      int64_t out = ceil_mode ? (span + strides[i] - 1) / strides[i] + 1 : span / strides[i] + 1;
      // ONNX (as PyTorch) drops a last window that would start in the end padding.
      if (ceil_mode && (out - 1) * strides[i] >= shape.back() + pads[i]) --out;
      // ceil_mode's last window may read past the requested end padding.
      partial_last_window |= (out - 1) * strides[i] + extent > shape.back() + pads[i] + pads[n + i];
    }
    const bool include_pad = !max && random.chance(0.5);
    Builder b;
    AttributeMap attrs = attributes({{"kernel_shape", Attribute::of_ints(kernel)},
                                     {"strides", Attribute::of_ints(strides)},
                                     {"pads", Attribute::of_ints(pads)},
                                     {"ceil_mode", Attribute::of_int(ceil_mode)}});
    if (max) attrs.set("dilations", Attribute::of_ints(dilations));
    if (!max) attrs.set("count_include_pad", Attribute::of_int(include_pad));
    b.output(b.node(max ? "MaxPool" : "AveragePool", {b.input(shape)}, attrs));
    // The declarations refuse what ONNX and oneDNN count differently (the extra
    // padding of a partial last window, under count_include_pad); those run on native.
    const bool claimed = !(include_pad && partial_last_window);
    const std::string op = max ? "MaxPool" : "AveragePool";
    expect_dnnl_matches_native(b.graph, {random.floats(shape)}, claimed ? std::set<std::string>{op} : std::set<std::string>{},
                               op + " trial " + std::to_string(trial) + " input " + shape_to_string(shape), Tolerance{},
                               claimed ? std::set<std::string>{} : std::set<std::string>{op});
  }
  // The random trials seldom draw a refused window: one that is, by
  // construction (the last of 3 windows over 5 reads one element of extra padding).
  Builder b;
  b.output(b.node("AveragePool", {b.input({1, 2, 5})},
                  attributes({{"kernel_shape", Attribute::of_ints({2})}, {"strides", Attribute::of_ints({2})},
                              {"ceil_mode", Attribute::of_int(1)}, {"count_include_pad", Attribute::of_int(1)}})));
  expect_dnnl_matches_native(b.graph, {random.floats({1, 2, 5})}, {}, "partial last window", Tolerance{}, {"AveragePool"});
}

TEST(DnnlBackend, GlobalPoolingMatchesNative) {
  Random random(12);
  for (int trial = 0; trial < 12; ++trial) {
    Shape shape = {random.between(1, 3), random.between(1, 24)};
    const int64_t spatial = random.between(1, 3);
    for (int64_t i = 0; i < spatial; ++i) shape.push_back(random.between(1, 9));
    const std::string op = trial % 2 ? "GlobalMaxPool" : "GlobalAveragePool";
    Builder b;
    b.output(b.node(op, {b.input(shape)}));
    expect_dnnl_matches_native(b.graph, {random.floats(shape)}, {op}, op + " " + shape_to_string(shape));
  }
}

/// Conv outputs take a blocked layout (16 or 8 channels a block) that pooling
/// and softmax over channels read as they are, padded channels included.
TEST(DnnlBackend, PoolingAndSoftmaxAfterConvolutionsInBlockedLayouts) {
  Random random(13);
  for (int64_t channels : {5, 16, 20}) {
    Builder b;
    const Shape shape = {2, 3, 11, 9};
    const ValueId x = b.input(shape);
    const ValueId w = b.constant(random.floats({channels, 3, 3, 3}));
    const ValueId conv = b.node("Conv", {x, w}, attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}}));
    const ValueId pool = b.node("MaxPool", {conv}, attributes({{"kernel_shape", Attribute::of_ints({3, 3})},
                                                             {"strides", Attribute::of_ints({2, 2})},
                                                             {"ceil_mode", Attribute::of_int(1)}}));
    const ValueId average = b.node("AveragePool", {conv}, attributes({{"kernel_shape", Attribute::of_ints({2, 3})},
                                                                   {"pads", Attribute::of_ints({1, 1, 1, 1})},
                                                                   {"count_include_pad", Attribute::of_int(1)}}));
    b.output(b.node("Softmax", {pool}, attributes({{"axis", Attribute::of_int(1)}})));
    b.output(b.node("GlobalAveragePool", {average}));
    b.output(b.node("LogSoftmax", {conv}, attributes({{"axis", Attribute::of_int(1)}})));
    expect_dnnl_matches_native(b.graph, {random.floats(shape)},
                               {"Conv", "MaxPool", "AveragePool", "Softmax", "LogSoftmax", "GlobalAveragePool"},
                               std::to_string(channels) + " channels", kSumsOfProducts);
  }
}

// ---------------------------------------------------------------------------
// Normalisation and softmax.

TEST(DnnlBackend, BatchNormalizationMatchesNative) {
  Random random(21);
  for (int trial = 0; trial < 8; ++trial) {
    Shape shape = {random.between(1, 3), random.between(1, 20)};
    const int64_t spatial = random.between(0, 3);
    for (int64_t i = 0; i < spatial; ++i) shape.push_back(random.between(1, 7));
    const int64_t c = shape[1];
    Builder b;
    const ValueId x = b.input(shape);
    // After a Relu (not a Conv), so it stays a batch normalisation of its own.
    const ValueId relu = b.node("Relu", {x});
    b.output(b.node("BatchNormalization", {relu, b.constant(random.floats({c})), b.constant(random.floats({c})),
                                           b.constant(random.floats({c})), b.constant(random.floats({c}, 0.1f, 2.0f))},
                    attributes({{"epsilon", Attribute::of_float(1e-3f)}})));
    expect_dnnl_matches_native(b.graph, {random.floats(shape)}, {"BatchNormalization"}, shape_to_string(shape));
  }
}

TEST(DnnlBackend, LayerNormalizationMatchesNative) {
  Random random(22);
  for (int trial = 0; trial < 10; ++trial) {
    Shape shape;
    const int64_t rank = random.between(2, 4);
    for (int64_t i = 0; i < rank; ++i) shape.push_back(random.between(1, 12));
    const int64_t last = shape.back();
    Builder b;
    std::vector<ValueId> inputs = {b.input(shape), b.constant(random.floats({last}))};
    if (trial % 2) inputs.push_back(b.constant(random.floats({last})));
    b.output(b.node("LayerNormalization", inputs,
                    attributes({{"axis", Attribute::of_int(trial % 3 ? -1 : rank - 1)},
                                {"epsilon", Attribute::of_float(trial % 4 ? 1e-5f : 1e-2f)}})));
    expect_dnnl_matches_native(b.graph, {random.floats(shape, -3, 3)}, {"LayerNormalization"}, shape_to_string(shape));
  }
}

TEST(DnnlBackend, SoftmaxOverEveryAxisMatchesNative) {
  Random random(23);
  for (int trial = 0; trial < 16; ++trial) {
    Shape shape;
    const int64_t rank = random.between(1, 4);
    for (int64_t i = 0; i < rank; ++i) shape.push_back(random.between(1, 9));
    const int64_t axis = random.between(-rank, rank - 1);
    const std::string op = trial % 2 ? "LogSoftmax" : "Softmax";
    Builder b;
    b.opset = 13;
    b.output(b.node(op, {b.input(shape)}, attributes({{"axis", Attribute::of_int(axis)}})));
    expect_dnnl_matches_native(b.graph, {random.floats(shape, -4, 4)}, {op},
                               op + " " + shape_to_string(shape) + " axis " + std::to_string(axis),
                               op == "LogSoftmax" ? kLogarithms : Tolerance{});
  }
}

TEST(DnnlBackend, SoftmaxBeforeOpset13RunsOnDnnlOnlyOverTheLastAxis) {
  Random random(24);
  const Shape shape = {2, 3, 4};
  for (int64_t axis : {2, -1, 1, 0}) {
    Builder b;
    b.opset = 11;
    b.output(b.node("Softmax", {b.input(shape)}, attributes({{"axis", Attribute::of_int(axis)}})));
    // Before opset 13 Softmax flattens at the axis: only the last axis means the same to oneDNN.
    const bool last = axis == 2 || axis == -1;
    const std::set<std::string> softmax = {"Softmax"}, none;
    expect_dnnl_matches_native(b.graph, {random.floats(shape, -4, 4)}, last ? softmax : none, "axis " + std::to_string(axis),
                               Tolerance{}, last ? none : softmax);
  }
}

// ---------------------------------------------------------------------------
// Layout ops.

TEST(DnnlBackend, ConcatMatchesNative) {
  Random random(31);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t rank = random.between(1, 4);
    Shape shape;
    for (int64_t i = 0; i < rank; ++i) shape.push_back(random.between(1, 6));
    const int64_t axis = random.between(-rank, rank - 1);
    const size_t positive = static_cast<size_t>(axis < 0 ? axis + rank : axis);
    Builder b;
    std::vector<ValueId> inputs;
    std::vector<Tensor> feeds;
    const int64_t count = random.between(1, 4);
    for (int64_t k = 0; k < count; ++k) {
      Shape part = shape;
      part[positive] = random.between(1, 5);
      if (k == 1 && random.chance(0.5)) {
        inputs.push_back(b.constant(random.floats(part)));  // a constant operand among computed ones
        continue;
      }
      inputs.push_back(b.input(part));
      feeds.push_back(random.floats(part));
    }
    if (feeds.empty()) {
      inputs.push_back(b.input(shape));
      feeds.push_back(random.floats(shape));
    }
    b.output(b.node("Concat", inputs, attributes({{"axis", Attribute::of_int(axis)}})));
    expect_dnnl_matches_native(b.graph, feeds, {"Concat"}, "rank " + std::to_string(rank) + " axis " + std::to_string(axis),
                               kExact);
  }
}

TEST(DnnlBackend, ConcatOfBlockedConvolutionOutputsMatchesNative) {
  Random random(32);
  Builder b;
  const Shape shape = {1, 4, 8, 8};
  const ValueId x = b.input(shape);
  const ValueId left = b.node("Conv", {x, b.constant(random.floats({16, 4, 1, 1}))});
  const ValueId right = b.node("Conv", {x, b.constant(random.floats({5, 4, 3, 3}))}, attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}}));
  const ValueId joined = b.node("Concat", {left, right, x}, attributes({{"axis", Attribute::of_int(1)}}));
  b.output(b.node("Conv", {joined, b.constant(random.floats({8, 25, 1, 1}))}));
  expect_dnnl_matches_native(b.graph, {random.floats(shape)}, {"Conv", "Concat"}, "conv concat", kSumsOfProducts);
}

TEST(DnnlBackend, TransposeMatchesNativeForRandomPermutations) {
  Random random(33);
  std::mt19937 shuffle(34);
  for (int trial = 0; trial < 16; ++trial) {
    const int64_t rank = random.between(2, 5);
    Shape shape;
    for (int64_t i = 0; i < rank; ++i) shape.push_back(random.between(1, 5));
    std::vector<int64_t> permutation(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i) permutation[static_cast<size_t>(i)] = i;
    std::shuffle(permutation.begin(), permutation.end(), shuffle);
    Builder b;
    AttributeMap attrs;
    if (trial % 5 != 0) attrs.set("perm", Attribute::of_ints(permutation));  // else ONNX's default: reversed axes
    b.output(b.node("Transpose", {b.input(shape)}, attrs));
    std::string what = shape_to_string(shape) + " perm";
    for (int64_t p : permutation) what += " " + std::to_string(p);
    // One whose dims of sizes other than 1 keep their order moves no element: it runs as a Reshape
    // (passes/transpose_as_reshape), on both backends.
    std::vector<int64_t> order = permutation;
    if (trial % 5 == 0) std::iota(order.rbegin(), order.rend(), 0);
    int64_t last = -1;
    bool view = true;
    for (int64_t d : order) {
      if (shape[static_cast<size_t>(d)] == 1) continue;
      view = view && d > last;
      last = d;
    }
    expect_dnnl_matches_native(b.graph, {random.floats(shape)}, {view ? "Reshape" : "Transpose"}, what, kExact);
  }
}

TEST(DnnlBackend, ReshapeFlattenSqueezeUnsqueezeIdentityMatchNative) {
  Random random(35);
  Builder b;
  const Shape shape = {2, 3, 1, 4};
  const ValueId x = b.input(shape);
  const ValueId relu = b.node("Relu", {x});  // a computed value, so no view reads a region input directly
  const ValueId squeezed = b.node("Squeeze", {relu, b.ints({2})});
  const ValueId unsqueezed = b.node("Unsqueeze", {squeezed, b.ints({0, 4})});
  const ValueId reshaped = b.node("Reshape", {unsqueezed, b.ints({6, -1})});
  const ValueId flat = b.node("Flatten", {x}, attributes({{"axis", Attribute::of_int(2)}}));
  const ValueId same = b.node("Identity", {reshaped});
  b.output(b.node("Tanh", {same}));
  b.output(flat);
  b.output(unsqueezed);
  expect_dnnl_matches_native(b.graph, {random.floats(shape)}, {"Squeeze", "Unsqueeze", "Reshape", "Flatten"}, "views");
}

TEST(DnnlBackend, SliceWithConstantBoundsMatchesNative) {
  Random random(37);
  for (int trial = 0; trial < 12; ++trial) {
    const int64_t rank = random.between(1, 4);
    Shape shape;
    for (int64_t i = 0; i < rank; ++i) shape.push_back(random.between(2, 7));
    // A random sub-block on 1..rank axes, with negative and past-the-end bounds now and then.
    std::vector<int64_t> starts, ends, axes;
    for (int64_t a = 0; a < rank; ++a) {
      if (a > 0 && random.between(0, 2) == 0) continue;
      const int64_t dim = shape[static_cast<size_t>(a)];
      const int64_t start = random.between(0, dim - 1);
      const int64_t end = random.between(start + 1, dim);
      starts.push_back(trial % 3 == 0 ? start - dim : start);
      ends.push_back(trial % 4 == 0 && end == dim ? INT64_MAX : end);
      axes.push_back(trial % 2 ? a - rank : a);
    }
    Builder b;
    const ValueId x = b.node("Relu", {b.input(shape)});
    const ValueId sliced = b.node("Slice", {x, b.ints(starts), b.ints(ends), b.ints(axes)});
    b.output(b.node("Sigmoid", {sliced}));
    expect_dnnl_matches_native(b.graph, {random.floats(shape)}, {"Slice"}, shape_to_string(shape));
  }
  // Steps other than 1 stay on native.
  Builder b;
  const Shape shape = {4, 6};
  const ValueId strided = b.node("Slice", {b.input(shape), b.ints({0}), b.ints({6}), b.ints({1}), b.ints({2})});
  b.output(strided);
  expect_dnnl_matches_native(b.graph, {random.floats(shape)}, {}, "step 2", kExact, {"Slice"});
}

// ---------------------------------------------------------------------------
// Conv, MatMul and Gemm.

TEST(DnnlBackend, ConvolutionsOfEveryRankGroupDilationAndPaddingMatchNative) {
  Random random(41);
  for (int trial = 0; trial < 24; ++trial) {
    const int64_t spatial = 1 + trial % 3;
    const int64_t group = std::vector<int64_t>{1, 2, 4}[static_cast<size_t>(random.between(0, 2))];
    const bool depthwise = trial % 5 == 0;
    const int64_t channels = depthwise ? 8 : group * random.between(1, 3);
    const int64_t out_channels = depthwise ? 8 : group * random.between(1, 4);
    const int64_t groups = depthwise ? 8 : group;
    Shape x_shape = {random.between(1, 2), channels};
    Shape w_shape = {out_channels, channels / groups};
    std::vector<int64_t> strides, dilations, pads(2 * static_cast<size_t>(spatial));
    for (int64_t i = 0; i < spatial; ++i) {
      x_shape.push_back(random.between(spatial == 3 ? 4 : 6, spatial == 3 ? 7 : 12));
      w_shape.push_back(random.between(1, 3));
      strides.push_back(random.between(1, 2));
      dilations.push_back(random.between(1, 2));
      pads[static_cast<size_t>(i)] = random.between(0, 1);
      pads[static_cast<size_t>(i + spatial)] = random.between(0, 1);
    }
    Builder b;
    AttributeMap attrs = attributes({{"strides", Attribute::of_ints(strides)},
                                     {"dilations", Attribute::of_ints(dilations)},
                                     {"group", Attribute::of_int(groups)}});
    if (trial % 4 == 1) {
      attrs.set("auto_pad", Attribute::of_string(trial % 8 == 1 ? "SAME_UPPER" : "VALID"));
    } else {
      attrs.set("pads", Attribute::of_ints(pads));
    }
    std::vector<ValueId> inputs = {b.input(x_shape), b.constant(random.floats(w_shape))};
    if (trial % 3 != 0) inputs.push_back(b.constant(random.floats({out_channels})));
    ValueId y = b.node("Conv", inputs, attrs);
    if (trial % 2 == 0) y = b.node("Relu", {y});  // the ConvActivation post-op
    b.output(y);
    const std::string what = "x " + shape_to_string(x_shape) + " w " + shape_to_string(w_shape) + " group " +
                             std::to_string(groups) + " trial " + std::to_string(trial);
    expect_dnnl_matches_native(b.graph, {random.floats(x_shape)}, {"Conv"}, what, kSumsOfProducts);
  }
}

TEST(DnnlBackend, MatMulAndGemmFormsMatchNative) {
  Random random(43);
  {  // Constant 2-D weights under a 3-D source: the collapsed, packed-weights form, with bias and Relu.
    Builder b;
    const ValueId x = b.input({2, 5, 8});
    const ValueId m = b.node("MatMul", {x, b.constant(random.floats({8, 6}))});
    b.output(b.node("Relu", {b.node("Add", {m, b.constant(random.floats({6}))})}));
    expect_dnnl_matches_native(b.graph, {random.floats({2, 5, 8})}, {"MatMul"}, "collapsed matmul", kSumsOfProducts);
  }
  {  // Two computed operands with batch broadcasting (attention scores).
    Builder b;
    const ValueId q = b.input({2, 3, 4, 5});
    const ValueId k = b.input({1, 3, 5, 4});
    b.output(b.node("MatMul", {q, k}));
    expect_dnnl_matches_native(b.graph, {random.floats({2, 3, 4, 5}), random.floats({1, 3, 5, 4})}, {"MatMul"}, "batched",
                               kSumsOfProducts);
  }
  for (int trial = 0; trial < 8; ++trial) {  // Gemm: transB, alpha, beta and every form of C.
    Builder b;
    const int64_t m = random.between(1, 6), k = random.between(1, 7), n = random.between(1, 9);
    const bool trans_b = trial % 2 == 1;
    const ValueId a = b.input({m, k});
    std::vector<ValueId> inputs = {a, b.constant(random.floats(trans_b ? Shape{n, k} : Shape{k, n}))};
    const int c_form = trial % 4;  // 0 none, 1 bias [N], 2 constant [M, N], 3 computed [M, N]
    std::vector<Tensor> feeds = {random.floats({m, k})};
    if (c_form == 1) inputs.push_back(b.constant(random.floats({n})));
    if (c_form == 2) inputs.push_back(b.constant(random.floats({m, n})));
    if (c_form == 3) {
      inputs.push_back(b.input({m, n}));
      feeds.push_back(random.floats({m, n}));
    }
    AttributeMap attrs = attributes({{"transB", Attribute::of_int(trans_b ? 1 : 0)},
                                     {"alpha", Attribute::of_float(trial % 3 == 0 ? 1.0f : 0.5f)},
                                     {"beta", Attribute::of_float(c_form == 3 ? 1.0f : 2.0f)}});
    b.output(b.node("Gemm", inputs, attrs));
    expect_dnnl_matches_native(b.graph, feeds, {"Gemm"}, "gemm trial " + std::to_string(trial), kSumsOfProducts);
  }
}

// ---------------------------------------------------------------------------
// ConvTranspose.

TEST(DnnlBackend, ConvTransposeMatchesNative) {
  Random random(41);
  for (int trial = 0; trial < 16; ++trial) {
    const size_t n = static_cast<size_t>(random.between(1, 2));
    const int64_t group = trial % 3 == 0 ? random.between(2, 3) : 1;
    const int64_t in_channels = group * random.between(1, 4);
    const int64_t out_per_group = random.between(1, 5);
    Shape x_shape = {random.between(1, 2), in_channels};
    Shape w_shape = {in_channels, out_per_group};
    std::vector<int64_t> strides, dilations, pads(2 * n), output_padding;
    for (size_t i = 0; i < n; ++i) {
      x_shape.push_back(random.between(1, 6));
      w_shape.push_back(random.between(1, 3));
      strides.push_back(random.between(1, 3));
      dilations.push_back(random.between(1, 2));
      pads[i] = random.between(0, w_shape.back() - 1);
      pads[n + i] = random.between(0, w_shape.back() - 1);
      // output_padding below the stride and within the end padding (more needs negative padding: refused).
      output_padding.push_back(std::min(random.between(0, strides.back() - 1), pads[n + i]));
    }
    Builder b;
    std::vector<ValueId> inputs = {b.input(x_shape), b.constant(random.floats(w_shape))};
    if (trial % 2) inputs.push_back(b.constant(random.floats({group * out_per_group})));
    b.output(b.node("ConvTranspose", inputs,
                    attributes({{"group", Attribute::of_int(group)}, {"strides", Attribute::of_ints(strides)},
                                {"dilations", Attribute::of_ints(dilations)}, {"pads", Attribute::of_ints(pads)},
                                {"output_padding", Attribute::of_ints(output_padding)}})));
    expect_dnnl_matches_native(b.graph, {random.floats(x_shape)}, {"ConvTranspose"},
                               "x " + shape_to_string(x_shape) + " w " + shape_to_string(w_shape) + " group " +
                                   std::to_string(group),
                               kSumsOfProducts);
  }
}

TEST(DnnlBackend, ConvTransposeBeyondTheEndPaddingRunsOnNative) {
  Builder b;
  Random random(42);
  const ValueId x = b.input({1, 2, 4, 4});
  b.output(b.node("ConvTranspose", {x, b.constant(random.floats({2, 3, 3, 3}))},
                  attributes({{"strides", Attribute::of_ints({2, 2})}, {"output_padding", Attribute::of_ints({1, 1})}})));
  expect_dnnl_matches_native(b.graph, {random.floats({1, 2, 4, 4})}, {}, "output_padding without end padding", kSumsOfProducts,
                             {"ConvTranspose"});
}

// ---------------------------------------------------------------------------
// Fused patterns, constants and layouts.

bool has_composite(const CompiledModel& model, const std::string& pattern) {
  for (const RegionSummary& region : model.regions()) {
    for (const std::string& composite : region.composites) {
      if (region.backend == "dnnl" && composite.rfind(pattern + ":", 0) == 0) return true;
    }
  }
  return false;
}

/// Conv → BatchNorm → Add(residual) → Relu, then Conv → Relu → MaxPool.
Graph residual_block(Random& random, const Shape& shape) {
  Builder b;
  const int64_t c = shape[1];
  const ValueId x = b.input(shape);
  const ValueId conv = b.node("Conv", {x, b.constant(random.floats({c, c, 3, 3})), b.constant(random.floats({c}))},
                              attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}}));
  const ValueId bn = b.node("BatchNormalization", {conv, b.constant(random.floats({c})), b.constant(random.floats({c})),
                                                   b.constant(random.floats({c})), b.constant(random.floats({c}, 0.5f, 2.0f))});
  const ValueId sum = b.node("Add", {bn, x});
  const ValueId relu = b.node("Relu", {sum});
  const ValueId conv2 = b.node("Conv", {relu, b.constant(random.floats({c, c, 1, 1}))});
  const ValueId relu2 = b.node("Relu", {conv2});
  b.output(b.node("MaxPool", {relu2}, attributes({{"kernel_shape", Attribute::of_ints({2, 2})},
                                                  {"strides", Attribute::of_ints({2, 2})}})));
  return b.graph;
}

TEST(DnnlBackend, ConvBatchNormAddReluFusesAndMatchesNative) {
  Random random(51);
  for (int64_t c : {3, 16, 24}) {
    const Shape shape = {2, c, 7, 6};
    const Graph graph = residual_block(random, shape);
    expect_dnnl_matches_native(graph, {random.floats(shape)}, {"Conv", "BatchNormalization", "Add", "Relu", "MaxPool"},
                               std::to_string(c) + " channels", kSumsOfProducts);
    std::unique_ptr<CompiledModel> model = compile_on(graph, {"dnnl", "native"});
    EXPECT_TRUE(has_composite(*model, "ConvBatchNormAddActivation"));
    EXPECT_EQ(model->regions().size(), 1u) << "the whole block is one oneDNN region";
  }
}

/// A residual Add fused as a sum post-op writes over its operand when the
/// operand is not read afterwards (no copy); here one residual is read again
/// after the Add (by a Mul and a later Conv) and must survive it, the other
/// is not and may be overwritten. Both are checked against native.
TEST(DnnlBackend, SumPostOpsInPlaceKeepOperandsThatAreReadLater) {
  Random random(54);
  const int64_t c = 64;  // blocked layouts alike for every convolution, so the sums can run in place
  Builder b;
  const ValueId x = b.input({1, c, 14, 14});
  // Weights of about 1/sqrt(c) keep values O(1) through the chain of seven convolutions.
  auto conv = [&](ValueId in) { return b.node("Conv", {in, b.constant(random.floats({c, c, 1, 1}, -0.2f, 0.2f))}); };
  const ValueId r1 = b.node("Relu", {conv(x)});
  const ValueId s1 = b.node("Relu", {b.node("Add", {conv(conv(r1)), r1})});  // r1 read again below
  const ValueId later = b.node("Mul", {r1, s1});
  const ValueId r2 = b.node("Relu", {conv(later)});
  const ValueId s2 = b.node("Add", {conv(conv(r2)), r2});  // r2's last reader
  b.output(b.node("Add", {s2, conv(r1)}));
  // A clobbered operand is off by O(1); the tolerance only absorbs seven layers of summation order
  // (native's portable kernels, TESSERA_ISA=baseline, sum in another order than AVX-512's).
  expect_dnnl_matches_native(b.graph, {random.floats({1, c, 14, 14})}, {"Conv", "Add", "Mul", "Relu"}, "residuals",
                             Tolerance{1e-4, 1e-3});
}

TEST(DnnlBackend, MatMulBiasGeluFusesAndMatchesNative) {
  Random random(52);
  for (int64_t rank : {2, 3}) {
    Shape shape = rank == 2 ? Shape{5, 12} : Shape{2, 5, 12};
    Builder b;
    const ValueId x = b.input(shape);
    const ValueId matmul = b.node("MatMul", {x, b.constant(random.floats({12, 20}))});
    const ValueId biased = b.node("Add", {matmul, b.constant(random.floats({20}))});
    const ValueId div = b.node("Div", {biased, b.constant(make_float({}, {1.41421356f}))});
    const ValueId erf = b.node("Erf", {div});
    const ValueId plus = b.node("Add", {erf, b.constant(make_float({}, {1.0f}))});
    const ValueId times = b.node("Mul", {biased, plus});
    b.output(b.node("Mul", {times, b.constant(make_float({}, {0.5f}))}));
    expect_dnnl_matches_native(b.graph, {random.floats(shape, -3, 3)}, {"MatMul", "Erf", "Div"}, "rank " + std::to_string(rank),
                               kSumsOfProducts);
    EXPECT_TRUE(has_composite(*compile_on(b.graph, {"dnnl", "native"}), "MatMulBiasGelu"));
  }
}

/// Constants are reordered once, when the region is built: a second run and a
/// region rebuilt from the saved payload must give the same bytes.
TEST(DnnlBackend, RepeatedRunsAndSavedArtifactsGiveIdenticalOutputs) {
  Random random(53);
  const Shape shape = {1, 16, 9, 9};
  const Graph graph = residual_block(random, shape);
  const Tensor x = random.floats(shape);
  std::unique_ptr<CompiledModel> model = compile_on(graph, {"dnnl", "native"});
  ASSERT_EQ(model->regions().size(), 1u);
  EXPECT_EQ(model->regions()[0].backend, "dnnl");
  EXPECT_GT(model->regions()[0].payload_bytes, 0u);
  const std::vector<Tensor> first = model->run({x.view()});
  const std::vector<Tensor> second = model->run({x.view()});
  expect_identical(second[0], first[0], "second run");
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tessera_dnnl_test_" + std::to_string(::getpid()) + ".tsr")).string();
  model->save(path);
  std::unique_ptr<CompiledModel> loaded = CompiledModel::load(path, CompileOptions{});
  std::filesystem::remove(path);
  EXPECT_EQ(loaded->regions()[0].backend, "dnnl");
  expect_identical(loaded->run({x.view()})[0], first[0], "loaded artifact");
  expect_identical(loaded->run({x.view()})[0], first[0], "loaded artifact, second run");
}


/// A region graph with every value typed, as the partitioner hands it over.
struct RegionBuilder {
  Graph graph;
  int counter = 0;
  ValueId value(Shape shape) {
    return graph.add_value("v" + std::to_string(counter++), TensorType::make(DType::kFloat32, std::move(shape)));
  }
  ValueId node(const std::string& op_type, std::vector<ValueId> inputs, Shape output, AttributeMap attrs = {}) {
    Node node;
    node.name = op_type + "_" + std::to_string(counter++);
    node.op_type = op_type;
    node.opset = 17;
    node.inputs = std::move(inputs);
    node.attrs = std::move(attrs);
    node.outputs = {value(std::move(output))};
    graph.nodes.push_back(std::move(node));
    return graph.nodes.back().outputs[0];
  }
};

size_t count_reorders(const dnnl_backend::Program& program) {
  return static_cast<size_t>(std::count_if(program.steps.begin(), program.steps.end(), [](const dnnl_backend::Step& step) {
    return step.kind == dnnl_backend::StepKind::kReorder;
  }));
}

/// Conv → Relu → MaxPool → Conv → Add → Softmax(channels) → GlobalAveragePool:
/// at most one reorder into the blocked layout and one out of it, however
/// many ops sit between (constants are reordered at load, not in steps).
TEST(DnnlBackendLowering, BlockedLayoutsStayInsideTheRegion) {
  Random random(61);
  RegionBuilder b;
  const ValueId x = b.value({1, 16, 12, 12});
  b.graph.inputs.push_back(x);
  const ValueId w1 = b.graph.add_constant("w1", random.floats({32, 16, 3, 3}));
  const ValueId w2 = b.graph.add_constant("w2", random.floats({32, 32, 3, 3}));
  const AttributeMap pad = attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}});
  const ValueId conv = b.node("Conv", {x, w1}, {1, 32, 12, 12}, pad);
  const ValueId relu = b.node("Relu", {conv}, {1, 32, 12, 12});
  const ValueId pool = b.node("MaxPool", {relu}, {1, 32, 6, 6},
                              attributes({{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}}));
  const ValueId conv2 = b.node("Conv", {pool, w2}, {1, 32, 6, 6}, pad);
  const ValueId sum = b.node("Add", {conv2, pool}, {1, 32, 6, 6});
  const ValueId softmax = b.node("Softmax", {sum}, {1, 32, 6, 6}, attributes({{"axis", Attribute::of_int(1)}}));
  b.graph.outputs.push_back(b.node("GlobalAveragePool", {softmax}, {1, 32, 1, 1}));
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  // Tuning may pick Winograd (other layouts) by measurement; count with the direct algorithm.
  setenv("TESSERA_DNNL_TUNE", "0", 1);
  const dnnl_backend::Program program = dnnl_backend::lower_region(b.graph, engine);
  unsetenv("TESSERA_DNNL_TUNE");
  EXPECT_EQ(program.steps.size() - count_reorders(program), 7u);
  EXPECT_LE(count_reorders(program), 2u);
  // Weights take their blocked layout once, at load: no step reorders a constant at run time.
  for (const dnnl_backend::Step& step : program.steps) {
    if (step.kind != dnnl_backend::StepKind::kReorder) continue;
    EXPECT_NE(program.slots[static_cast<size_t>(step.inputs[0])].kind, dnnl_backend::Slot::Kind::kConstant);
  }
  // The payload round-trips to the same program.
  const std::vector<uint8_t> payload = dnnl_backend::serialize_program(program);
  EXPECT_EQ(dnnl_backend::serialize_program(dnnl_backend::parse_program(payload)), payload);
}

/// Layer norm and other softmax axes need plain layouts: one reorder out of the
/// blocked Conv output, none after it.
TEST(DnnlBackendLowering, PlainOnlyOpsReorderOnceAfterABlockedProducer) {
  Random random(62);
  RegionBuilder b;
  const ValueId x = b.value({2, 16, 8, 8});
  b.graph.inputs.push_back(x);
  const ValueId w = b.graph.add_constant("w", random.floats({16, 16, 3, 3}));
  const ValueId scale = b.graph.add_constant("scale", random.floats({8}));
  const ValueId conv = b.node("Conv", {x, w}, {2, 16, 8, 8}, attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}}));
  const ValueId norm = b.node("LayerNormalization", {conv, scale}, {2, 16, 8, 8});
  b.graph.outputs.push_back(b.node("Softmax", {norm}, {2, 16, 8, 8}, attributes({{"axis", Attribute::of_int(-1)}})));
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  setenv("TESSERA_DNNL_TUNE", "0", 1);  // direct convolutions: the layouts under test
  const dnnl_backend::Program program = dnnl_backend::lower_region(b.graph, engine);
  unsetenv("TESSERA_DNNL_TUNE");
  EXPECT_LE(count_reorders(program), 2u);
  // The last step writes the output in plain layout itself: no reorder after the softmax.
  EXPECT_EQ(program.steps.back().kind, dnnl_backend::StepKind::kSoftmax);
}

/// The runtime's part for one run of a host region: the given inputs, the
/// region's constants, and every other value allocated at its static shape.
class HostStore : public ValueStore {
 public:
  HostStore(const Graph& region, const std::vector<Tensor>& inputs)
      : views_(region.values.size()), owned_(region.values.size()) {
    for (size_t i = 0; i < region.values.size(); ++i) {
      const Value& v = region.values[i];
      if (v.constant) {
        views_[i] = v.constant->view();
      } else if (v.type.is_static()) {
        views_[i].dtype = v.type.dtype;
        views_[i].shape = v.type.dims;
      }
    }
    for (size_t k = 0; k < region.inputs.size(); ++k) views_[static_cast<size_t>(region.inputs[k])] = inputs[k].view();
  }
  const TensorView& get(ValueId id) override { return views_[static_cast<size_t>(id)]; }
  TensorView& output(ValueId id) override {
    if (!views_[static_cast<size_t>(id)].data) allocate(id);
    return views_[static_cast<size_t>(id)];
  }
  void allocate(ValueId id) override {
    TensorView& v = views_[static_cast<size_t>(id)];
    owned_[static_cast<size_t>(id)] = Tensor(v.dtype, v.shape);
    v.data = owned_[static_cast<size_t>(id)].data();
  }
  Tensor read(ValueId id) const { return Tensor::from_view(views_[static_cast<size_t>(id)]); }

 private:
  std::vector<TensorView> views_;
  std::vector<Tensor> owned_;
};

/// A hostile payload (every truncation, every single-byte change) is a clean
/// tessera error or a program that still loads and then runs, to an error
/// that is not internal or to some output; never a crash.
TEST(DnnlBackendLowering, HostilePayloadsAreRefusedCleanly) {
  Random random(63);
  RegionBuilder b;
  const ValueId x = b.value({1, 8, 6, 6});
  b.graph.inputs.push_back(x);
  const ValueId w = b.graph.add_constant("w", random.floats({8, 8, 3, 3}));
  const ValueId conv = b.node("Conv", {x, w}, {1, 8, 6, 6}, attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}}));
  const ValueId relu = b.node("Relu", {conv}, {1, 8, 6, 6});
  b.graph.outputs.push_back(b.node("MaxPool", {relu}, {1, 8, 3, 3},
                                   attributes({{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}})));
  std::unique_ptr<Backend> dnnl = find_backend("dnnl")->make(RegionOptions{});
  const CompiledRegion compiled = dnnl->compile(b.graph, RegionOptions{});
  const std::vector<uint8_t>& payload = compiled.payload;
  const std::vector<Tensor> inputs = {random.floats({1, 8, 6, 6})};
  const ValueId output = b.graph.outputs[0];
  HostStore compiled_store(b.graph, inputs);
  compiled.executable->run(compiled_store);
  const Tensor compiled_output = compiled_store.read(output);
  size_t runs = 0;
  // Loads `bytes` and, when that succeeds, runs the program; whether it loaded.
  auto load = [&](const std::vector<uint8_t>& bytes) -> bool {
    std::unique_ptr<ExecutableRegion> executable;
    try {
      executable = dnnl->load(b.graph, bytes, RegionOptions{});
    } catch (const Error& e) {
      EXPECT_NE(e.kind(), ErrorKind::kInternal) << e.what();
      return false;
    }
    HostStore store(b.graph, inputs);
    try {
      executable->run(store);
      ++runs;
    } catch (const Error& e) {
      EXPECT_NE(e.kind(), ErrorKind::kInternal) << e.what();
    }
    return true;
  };
  ASSERT_TRUE(load(payload));
  ASSERT_EQ(runs, 1u);
  {  // the store plays the runtime's part faithfully: the loaded payload gives the compiled region's bytes
    HostStore store(b.graph, inputs);
    dnnl->load(b.graph, payload, RegionOptions{})->run(store);
    expect_identical(store.read(output), compiled_output, "loaded payload");
  }
  for (size_t length = 0; length < payload.size(); ++length) {
    EXPECT_FALSE(load(std::vector<uint8_t>(payload.begin(), payload.begin() + static_cast<std::ptrdiff_t>(length))))
        << "truncated to " << length;
  }
  size_t still_loading = 0;
  for (size_t i = 0; i < payload.size(); ++i) {
    for (uint8_t value : {uint8_t(payload[i] ^ 0x01), uint8_t(0xFF)}) {
      std::vector<uint8_t> bytes = payload;
      if (bytes[i] == value) continue;
      bytes[i] = value;
      still_loading += load(bytes);
    }
  }
  // Some changes are harmless (a weight's lowest bit); most must be caught.
  // Every mutant that loaded was run by load(); some must have run to the end,
  // or the run check would pass on nothing (248 of 739 payload bytes' mutants
  // load and run when this was written).
  EXPECT_LT(still_loading, payload.size());
  EXPECT_GT(runs, 1u) << still_loading << " mutants loaded";
}


}  // namespace
}  // namespace tessera::testing
