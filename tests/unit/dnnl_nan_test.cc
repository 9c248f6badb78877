// NaN and ±Inf through every op family the oneDNN backend claims (and the
// native kernels they fall back to): eltwise activations, Conv with fused
// post-ops, pooling, MatMul/Gemm with bias and activation, softmax,
// normalisation, binary ops, GELU's erf pattern and the reductions. Each
// graph gets NaN, +Inf and -Inf planted at a few positions and runs with the
// default backends (dnnl,native) and native alone; both must give NaN and
// ±Inf exactly where an independent scalar reference written here (in double,
// numpy's and PyTorch's semantics: NaN propagates through max, min, clip,
// relu and pooling) does, and the finite values within tolerance. Each case
// also pins where its ops ran: every op oneDNN claims must run on dnnl. Where
// oneDNN's kernel drops or invents NaN/Inf (max-based relu, pooling, clip,
// binary max/min, exp, softmax) the region is exact only for finite inputs,
// and the runtime's guard runs it on native for these inputs (GuardTest below
// shows both sides of the guard), and again on native after a run that made
// a NaN from finite inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ir/op_schema.h"
#include "partition/declarations.h"
#include "runtime/backend_registry.h"
#include "runtime/session.h"
#include "graph_builder.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using Builder = GraphBuilder;

/// Values in [low, high) with NaN, +Inf and -Inf planted at fixed fractions
/// of the tensor (near the first and last elements), so vector bodies and
/// tails both see them.
Tensor with_specials(Shape shape, uint32_t seed, float low = -2, float high = 2) {
  Tensor t = random_float(shape, seed);
  float* p = t.as<float>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) p[i] = low + (high - low) * (p[i] + 1) / 2;
  const float specials[] = {NAN, INFINITY, -INFINITY};
  const double at[] = {0.0, 0.13, 0.29, 0.41, 0.58, 0.77, 0.9, 1.0};
  for (size_t k = 0; k < std::size(at); ++k) {
    // Shifted by the seed, so two operands made with different seeds have their specials apart.
    const int64_t i = std::min(n - 1, static_cast<int64_t>(at[k] * static_cast<double>(n)) + static_cast<int64_t>(seed % 5));
    p[i] = specials[k % 3];
  }
  return t;
}

std::vector<double> to_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.double_at(i);
  return v;
}

const char* kind_of(double v) { return std::isnan(v) ? "NaN" : std::isinf(v) ? (v > 0 ? "+Inf" : "-Inf") : "finite"; }

/// NaN and ±Inf exactly where `expected` has them; finite values within
/// `tolerance` relative to the larger of 1 and |expected|.
void expect_same_values(const Tensor& actual, const std::vector<double>& expected, const std::string& what,
                        double tolerance = 1e-4) {
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size())) << what;
  int failures = 0;
  for (size_t i = 0; i < expected.size() && failures < 6; ++i) {
    const double a = actual.double_at(static_cast<int64_t>(i)), e = expected[i];
    const bool same_kind = std::string(kind_of(a)) == kind_of(e);
    if (!same_kind || (std::isfinite(e) && !(std::fabs(a - e) <= tolerance * std::max(1.0, std::fabs(e))))) {
      ADD_FAILURE() << what << " element " << i << ": got " << a << " (" << kind_of(a) << "), expected " << e << " ("
                    << kind_of(e) << ")";
      ++failures;
    }
  }
}

std::unique_ptr<CompiledModel> compile_on(const Graph& graph, std::vector<std::string> backends) {
  CompileOptions options;
  options.backends = std::move(backends);
  options.strict = options.backends.size() == 1;
  return CompiledModel::compile(graph, options);
}

std::string dnnl_refusal(const CompiledModel& model, const std::string& name) {
  std::unique_ptr<Backend> dnnl = find_backend("dnnl")->make(RegionOptions{});
  for (const Node& node : model.graph().nodes) {
    if (node.name == name) return dnnl->declarations().supports(model.graph(), node).reason;
  }
  return "(node not found)";
}

/// Where the ops of a case must run with the default backends.
struct Placement {
  std::set<std::string> on_dnnl;    // op types that must run on dnnl
  std::set<std::string> on_native;  // op types oneDNN must refuse (they run on native)
};

/// Runs `graph` with the default backends and with native alone; both must
/// match `expected` (one vector per output).
void expect_matches_reference(const Graph& graph, const std::vector<Tensor>& feeds,
                              const std::vector<std::vector<double>>& expected, const Placement& placement,
                              const std::string& what, double tolerance = 1e-4) {
  SCOPED_TRACE(what);
  std::vector<TensorView> views;
  for (const Tensor& t : feeds) views.push_back(t.view());
  for (const std::vector<std::string>& backends : {std::vector<std::string>{"dnnl", "native"}, std::vector<std::string>{"native"}}) {
    const bool defaults = backends.size() == 2;
    std::unique_ptr<CompiledModel> model = compile_on(graph, backends);
    if (defaults) {
      std::set<std::string> seen;
      for (const NodePlacement& p : model->placement()) {
        if (p.region < 0) continue;
        seen.insert(p.op_type);
        if (placement.on_dnnl.count(p.op_type)) {
          EXPECT_EQ(p.backend, "dnnl") << p.node_name << " (" << p.op_type << ") ran on " << p.backend << ": "
                                       << dnnl_refusal(*model, p.node_name);
        }
        if (placement.on_native.count(p.op_type)) {
          EXPECT_EQ(p.backend, "native") << p.node_name << " (" << p.op_type << ") should be refused by dnnl";
        }
      }
      for (const std::string& op : placement.on_dnnl) EXPECT_TRUE(seen.count(op)) << op << " did not run";
      for (const std::string& op : placement.on_native) EXPECT_TRUE(seen.count(op)) << op << " did not run";
    }
    const std::vector<Tensor> outputs = model->run(views);
    ASSERT_EQ(outputs.size(), expected.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      expect_same_values(outputs[i], expected[i], (defaults ? "dnnl,native" : "native") + std::string(" output ") + std::to_string(i),
                         tolerance);
    }
  }
}

// ---------------------------------------------------------------------------
// Scalar references (double; NaN propagates as in numpy and PyTorch).

double relu(double x) { return std::isnan(x) ? x : (x < 0 ? 0.0 : x); }
double clip(double x, double low, double high) { return std::isnan(x) ? x : std::min(std::max(x, low), high); }
double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }
double hard_swish(double x) { return std::isnan(x) ? x : x * clip(x / 6 + 0.5, 0, 1); }
double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
/// numpy's maximum / minimum: NaN if either is NaN.
double maximum(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b); }
double minimum(double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b); }

std::vector<double> map(const std::vector<double>& x, const std::function<double(double)>& f) {
  std::vector<double> y(x.size());
  std::transform(x.begin(), x.end(), y.begin(), f);
  return y;
}

// ---------------------------------------------------------------------------
// Activations (eltwise) on their own.

struct ActivationCase {
  std::string op;
  std::function<double(double)> reference;
  std::vector<float> bounds;  // Clip's min and max inputs (NaN: omitted)
  AttributeMap attrs;
  bool on_dnnl = true;
};

TEST(DnnlNan, ActivationsPropagateNanAndInf) {
  const std::vector<ActivationCase> cases = {
      {"Relu", relu, {}, {}, true},
      {"LeakyRelu", [](double x) { return x < 0 ? 0.1 * x : x; }, {}, attributes({{"alpha", Attribute::of_float(0.1f)}}), true},
      // alpha = 0 is oneDNN's max form (NaN gives 0): the guard runs it on native. (-Inf * 0 is NaN, as in torch.)
      {"LeakyRelu", [](double x) { return x < 0 ? 0.0 * x : x; }, {}, attributes({{"alpha", Attribute::of_float(0.0f)}}), true},
      {"Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, {}, {}, true},
      {"Tanh", [](double x) { return std::tanh(x); }, {}, {}, true},
      {"Elu", [](double x) { return x < 0 ? std::expm1(x) : x; }, {}, {}, true},
      {"Sqrt", [](double x) { return std::sqrt(x); }, {}, {}, true},
      {"Abs", [](double x) { return std::fabs(x); }, {}, {}, true},
      {"Neg", [](double x) { return -x; }, {}, {}, true},
      {"Softplus", softplus, {}, {}, true},
      {"HardSwish", hard_swish, {}, {}, true},
      // oneDNN's exp gives +Inf for NaN, its clip (max then min) the lower bound: the guard runs them on native.
      {"Exp", [](double x) { return std::exp(x); }, {}, {}, true},
      {"Clip", relu, {0.0f, INFINITY}, {}, true},
      // An omitted max is FLT_MAX in ONNX (it clips +Inf).
      {"Clip", [](double x) { return clip(x, 0, FLT_MAX); }, {0.0f, NAN}, {}, true},
      {"Clip", [](double x) { return clip(x, 0, 6); }, {0.0f, 6.0f}, {}, true},
      {"Clip", [](double x) { return clip(x, -1, 1); }, {-1.0f, 1.0f}, {}, true},
      {"Clip", [](double x) { return clip(x, -FLT_MAX, 0.5); }, {NAN, 0.5f}, {}, true},
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    const ActivationCase& c = cases[k];
    const Shape shape = {2, 7, 5, 9};  // 630 elements: vector bodies and tails
    Builder b;
    std::vector<ValueId> inputs = {b.input(shape)};
    if (!c.bounds.empty()) {
      inputs.push_back(std::isnan(c.bounds[0]) ? kNoValue : b.scalar(c.bounds[0]));
      if (!std::isnan(c.bounds[1])) inputs.push_back(b.scalar(c.bounds[1]));
    }
    b.output(b.node(c.op, inputs, c.attrs));
    const Tensor x = with_specials(shape, 100 + static_cast<uint32_t>(k), -4, 4);
    Placement placement;
    (c.on_dnnl ? placement.on_dnnl : placement.on_native).insert(c.op);
    expect_matches_reference(b.graph, {x}, {map(to_doubles(x), c.reference)}, placement, c.op + " case " + std::to_string(k));
  }
}

// ---------------------------------------------------------------------------
// Convolution with fused post-ops (the hot path of every CNN).

/// Direct 2-D convolution in double (pads symmetric, stride 1): NaN and Inf
/// reach exactly the outputs whose window holds them.
std::vector<double> conv2d(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w, const Shape& ws,
                           const std::vector<double>& bias, int64_t pad) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], k = ws[0], kh = ws[2], kw = ws[3];
  const int64_t oh = h + 2 * pad - kh + 1, ow = wd + 2 * pad - kw + 1;
  std::vector<double> y(static_cast<size_t>(n * k * oh * ow));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < k; ++o)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double sum = bias.empty() ? 0.0 : bias[static_cast<size_t>(o)];
          for (int64_t ci = 0; ci < c; ++ci)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t yi = i + a - pad, xj = j + e - pad;
                if (yi < 0 || yi >= h || xj < 0 || xj >= wd) continue;
                sum += x[static_cast<size_t>(((b * c + ci) * h + yi) * wd + xj)] *
                       w[static_cast<size_t>(((o * c + ci) * kh + a) * kw + e)];
              }
          y[static_cast<size_t>(((b * k + o) * oh + i) * ow + j)] = sum;
        }
  return y;
}

/// A few isolated specials (so that Inf and -Inf rarely meet in one window).
Tensor image_with_specials(Shape shape, uint32_t seed) {
  Tensor t = random_float(shape, seed);
  float* p = t.as<float>();
  const int64_t hw = shape[2] * shape[3];
  p[0 * hw + 2 * shape[3] + 3] = NAN;
  p[1 * hw + 9 * shape[3] + 12] = INFINITY;
  p[2 * hw + 5 * shape[3] + 1] = -INFINITY;
  p[(shape[1] - 1) * hw + hw - 1] = NAN;  // the last element
  return t;
}

TEST(DnnlNan, ConvolutionWithFusedPostOpsPropagatesNanAndInf) {
  // 3x3 (where Winograd could be chosen), and 1x1; 5 and 32 output channels (blocked layouts).
  for (int64_t kernel : {3, 1}) {
    for (int64_t channels : {5, 32}) {
      for (const std::string& tail : {std::string("Relu"), std::string("BatchNormAddRelu"), std::string("Clip6")}) {
        const Shape xs = {1, 4, 12, 16};
        const Shape ws = {channels, 4, kernel, kernel};
        const int64_t pad = kernel / 2;
        const Tensor x = image_with_specials(xs, 7);
        const Tensor w = random_float(ws, 8);
        const Tensor bias = random_float({channels}, 9);
        Builder b;
        const ValueId in = b.input(xs);
        ValueId y = b.node("Conv", {in, b.constant(w), b.constant(bias)},
                           attributes({{"pads", Attribute::of_ints({pad, pad, pad, pad})},
                                       {"kernel_shape", Attribute::of_ints({kernel, kernel})}}));
        std::vector<double> expected = conv2d(to_doubles(x), xs, to_doubles(w), ws, to_doubles(bias), pad);
        Placement placement{{"Conv"}, {}};
        if (tail == "BatchNormAddRelu") {
          const Tensor scale = random_float({channels}, 10), shift = random_float({channels}, 11);
          const Tensor mean = random_float({channels}, 12);
          Tensor var = random_float({channels}, 13);
          for (int64_t i = 0; i < channels; ++i) var.as<float>()[i] = 0.5f + std::fabs(var.as<float>()[i]);
          y = b.node("BatchNormalization", {y, b.constant(scale), b.constant(shift), b.constant(mean), b.constant(var)});
          // The residual: a second Conv of the same input (same shape), summed in.
          const Tensor w2 = random_float(ws, 14);
          const ValueId other = b.node("Conv", {in, b.constant(w2)}, attributes({{"pads", Attribute::of_ints({pad, pad, pad, pad})},
                                                                                {"kernel_shape", Attribute::of_ints({kernel, kernel})}}));
          y = b.node("Relu", {b.node("Add", {y, other})});
          const std::vector<double> residual = conv2d(to_doubles(x), xs, to_doubles(w2), ws, {}, pad);
          const int64_t plane = static_cast<int64_t>(expected.size()) / channels;
          for (size_t i = 0; i < expected.size(); ++i) {
            const size_t ch = (i / static_cast<size_t>(plane)) % static_cast<size_t>(channels);
            const double normalised = (expected[i] - mean.as<float>()[ch]) / std::sqrt(double(var.as<float>()[ch]) + 1e-5) *
                                          scale.as<float>()[ch] + shift.as<float>()[ch];
            expected[i] = relu(normalised + residual[i]);
          }
          placement.on_dnnl = {"Conv", "BatchNormalization", "Add", "Relu"};
        } else if (tail == "Relu") {
          y = b.node("Relu", {y});
          expected = map(expected, relu);
          placement.on_dnnl = {"Conv", "Relu"};
        } else {
          y = b.node("Clip", {y, b.scalar(0), b.scalar(6)});
          expected = map(expected, [](double v) { return clip(v, 0, 6); });
          placement.on_dnnl = {"Conv", "Clip"};
        }
        b.output(y);
        expect_matches_reference(b.graph, {x}, {expected}, placement,
                                 "Conv " + std::to_string(kernel) + "x" + std::to_string(kernel) + " to " +
                                     std::to_string(channels) + " channels + " + tail);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Pooling.

TEST(DnnlNan, PoolingPropagatesNanAndInf) {
  const Shape xs = {1, 3, 9, 11};
  Tensor x = with_specials(xs, 21);
  // A whole 3x3 window of -Inf (channel 1, rows 3..5, columns 3..5): max pooling gives -Inf there.
  for (int64_t i = 3; i < 6; ++i)
    for (int64_t j = 3; j < 6; ++j) x.as<float>()[(1 * 9 + i) * 11 + j] = -INFINITY;
  const std::vector<double> xv = to_doubles(x);
  const int64_t oh = 5, ow = 6;  // 3x3, stride 2, pads 1
  std::vector<double> max_ref, average_ref;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double best = -kInf, sum = 0;
        int64_t count = 0;
        for (int64_t a = 0; a < 3; ++a)
          for (int64_t e = 0; e < 3; ++e) {
            const int64_t yi = i * 2 - 1 + a, xj = j * 2 - 1 + e;
            if (yi < 0 || yi >= 9 || xj < 0 || xj >= 11) continue;
            const double v = xv[static_cast<size_t>((c * 9 + yi) * 11 + xj)];
            best = maximum(best, v);
            sum += v;
            ++count;
          }
        max_ref.push_back(best);
        average_ref.push_back(sum / static_cast<double>(count));
      }
  std::vector<double> global_max, global_average;
  for (int64_t c = 0; c < 3; ++c) {
    double best = -kInf, sum = 0;
    for (int64_t i = 0; i < 99; ++i) {
      best = maximum(best, xv[static_cast<size_t>(c * 99 + i)]);
      sum += xv[static_cast<size_t>(c * 99 + i)];
    }
    global_max.push_back(best);
    global_average.push_back(sum / 99);
  }
  const AttributeMap window = attributes({{"kernel_shape", Attribute::of_ints({3, 3})},
                                          {"strides", Attribute::of_ints({2, 2})},
                                          {"pads", Attribute::of_ints({1, 1, 1, 1})}});
  struct Case {
    std::string op;
    std::vector<double> expected;
    bool on_dnnl;
  };
  // oneDNN's max pooling drops NaN and gives -FLT_MAX for a window of -Inf: the guard runs it on native.
  for (const Case& c : {Case{"MaxPool", max_ref, true}, Case{"AveragePool", average_ref, true},
                        Case{"GlobalMaxPool", global_max, true}, Case{"GlobalAveragePool", global_average, true}}) {
    Builder b;
    b.output(b.node(c.op, {b.input(xs)}, c.op.rfind("Global", 0) == 0 ? AttributeMap{} : window));
    Placement placement;
    (c.on_dnnl ? placement.on_dnnl : placement.on_native).insert(c.op);
    expect_matches_reference(b.graph, {x}, {c.expected}, placement, c.op);
  }
}

// ---------------------------------------------------------------------------
// MatMul / Gemm with bias and activation.

TEST(DnnlNan, MatMulWithBiasAndReluPropagatesNanAndInf) {
  const int64_t batch = 3, m = 6, k = 20, n = 24;
  const Tensor a = with_specials({batch, m, k}, 31);
  const Tensor w = random_float({k, n}, 32);
  const Tensor bias = random_float({n}, 33);
  std::vector<double> expected;
  const std::vector<double> av = to_doubles(a), wv = to_doubles(w), bv = to_doubles(bias);
  for (int64_t r = 0; r < batch * m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += av[static_cast<size_t>(r * k + i)] * wv[static_cast<size_t>(i * n + j)];
      expected.push_back(relu(sum + bv[static_cast<size_t>(j)]));
    }
  Builder b;
  b.output(b.node("Relu", {b.node("Add", {b.node("MatMul", {b.input({batch, m, k}), b.constant(w)}), b.constant(bias)})}));
  expect_matches_reference(b.graph, {a}, {expected}, {{"MatMul", "Add", "Relu"}, {}}, "MatMul + bias + Relu");

  // Gemm (transB) + Relu on a 2-D input.
  const Tensor a2 = with_specials({m, k}, 34);
  const Tensor wt = random_float({n, k}, 35);
  std::vector<double> expected2;
  const std::vector<double> a2v = to_doubles(a2), wtv = to_doubles(wt);
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double sum = bv[static_cast<size_t>(j)];
      for (int64_t i = 0; i < k; ++i) sum += a2v[static_cast<size_t>(r * k + i)] * wtv[static_cast<size_t>(j * k + i)];
      expected2.push_back(relu(sum));
    }
  Builder g;
  g.output(g.node("Relu", {g.node("Gemm", {g.input({m, k}), g.constant(wt), g.constant(bias)},
                                  attributes({{"transB", Attribute::of_int(1)}}))}));
  expect_matches_reference(g.graph, {a2}, {expected2}, {{"Gemm", "Relu"}, {}}, "Gemm + Relu");
}

// ---------------------------------------------------------------------------
// Softmax and normalisation.

/// Rows of 40 along the last axis: one with a NaN, one with +Inf, one with
/// -Inf, one all -Inf, the rest finite.
Tensor softmax_rows(int64_t rows) {
  Tensor t = random_float({rows, 40}, 41);
  float* p = t.as<float>();
  p[0 * 40 + 37] = NAN;
  p[1 * 40 + 3] = INFINITY;
  p[2 * 40 + 17] = -INFINITY;
  for (int64_t j = 0; j < 40; ++j) p[3 * 40 + j] = -INFINITY;
  return t;
}

TEST(DnnlNan, SoftmaxAndLayerNormPropagateNanAndInf) {
  const int64_t rows = 6;
  const Tensor x = softmax_rows(rows);
  const std::vector<double> xv = to_doubles(x);
  std::vector<double> softmax, log_softmax, layer_norm;
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = xv.data() + r * 40;
    // numpy: x - max(x) (NaN if any NaN; Inf - Inf is NaN), then exp and normalise.
    double m = -kInf;
    for (int64_t j = 0; j < 40; ++j) m = maximum(m, row[j]);
    double sum = 0, mean = 0, var = 0;
    for (int64_t j = 0; j < 40; ++j) sum += std::exp(row[j] - m);
    for (int64_t j = 0; j < 40; ++j) mean += row[j] / 40;
    for (int64_t j = 0; j < 40; ++j) var += (row[j] - mean) * (row[j] - mean) / 40;
    for (int64_t j = 0; j < 40; ++j) {
      softmax.push_back(std::exp(row[j] - m) / sum);
      log_softmax.push_back(row[j] - m - std::log(sum));
      layer_norm.push_back((row[j] - mean) / std::sqrt(var + 1e-5));
    }
  }
  for (const std::string op : {"Softmax", "LogSoftmax"}) {
    Builder b;
    b.output(b.node(op, {b.input({rows, 40})}, attributes({{"axis", Attribute::of_int(-1)}})));
    // oneDNN's softmax drops NaN from its max and gives +Inf for exp(NaN): the guard runs it on native.
    expect_matches_reference(b.graph, {x}, {op == "Softmax" ? softmax : log_softmax}, {{op}, {}}, op);
  }
  Builder b;
  b.output(b.node("LayerNormalization", {b.input({rows, 40}), b.constant(make_float({40}, std::vector<float>(40, 1.0f))),
                                         b.constant(make_float({40}, std::vector<float>(40, 0.0f)))},
                  attributes({{"axis", Attribute::of_int(-1)}, {"epsilon", Attribute::of_float(1e-5f)}})));
  expect_matches_reference(b.graph, {x}, {layer_norm}, {{"LayerNormalization"}, {}}, "LayerNormalization");
}

TEST(DnnlNan, BatchNormalizationPropagatesNanAndInf) {
  const Shape xs = {2, 6, 5, 7};
  const Tensor x = with_specials(xs, 51);
  const Tensor scale = random_float({6}, 52), shift = random_float({6}, 53), mean = random_float({6}, 54);
  Tensor var = random_float({6}, 55);
  for (int64_t i = 0; i < 6; ++i) var.as<float>()[i] = 0.5f + std::fabs(var.as<float>()[i]);
  std::vector<double> expected = to_doubles(x);
  for (size_t i = 0; i < expected.size(); ++i) {
    const size_t c = (i / 35) % 6;
    expected[i] = (expected[i] - mean.as<float>()[c]) / std::sqrt(double(var.as<float>()[c]) + 1e-5) * scale.as<float>()[c] +
                  shift.as<float>()[c];
  }
  Builder b;
  b.output(b.node("BatchNormalization", {b.input(xs), b.constant(scale), b.constant(shift), b.constant(mean), b.constant(var)}));
  expect_matches_reference(b.graph, {x}, {expected}, {{"BatchNormalization"}, {}}, "BatchNormalization");
}

// ---------------------------------------------------------------------------
// Binary ops (NaN and Inf in both operands, Inf - Inf, 0 * Inf, x / 0).

TEST(DnnlNan, BinaryOpsPropagateNanAndInf) {
  const Shape shape = {3, 5, 41};
  const Tensor a = with_specials(shape, 61);
  Tensor bt = with_specials(shape, 62);
  // Some exact zeros in the divisor and the other factor.
  for (int64_t i = 5; i < bt.numel(); i += 37) bt.as<float>()[i] = 0.0f;
  const std::vector<double> av = to_doubles(a), bv = to_doubles(bt);
  struct Case {
    std::string op;
    std::function<double(double, double)> f;
    bool on_dnnl;
  };
  const std::vector<Case> cases = {
      {"Add", [](double p, double q) { return p + q; }, true},
      {"Sub", [](double p, double q) { return p - q; }, true},
      {"Mul", [](double p, double q) { return p * q; }, true},
      {"Div", [](double p, double q) { return double(float(p) / float(q)); }, true},
      // oneDNN's binary max/min return the second operand when the first is NaN: the guard runs them on native.
      {"Max", maximum, true},
      {"Min", minimum, true},
  };
  for (const Case& c : cases) {
    std::vector<double> expected(av.size());
    for (size_t i = 0; i < av.size(); ++i) expected[i] = c.f(av[i], bv[i]);
    Builder b;
    b.output(b.node(c.op, {b.input(shape), b.input(shape)}));
    Placement placement;
    (c.on_dnnl ? placement.on_dnnl : placement.on_native).insert(c.op);
    expect_matches_reference(b.graph, {a, bt}, {expected}, placement, c.op);
    // The same op followed by Relu (BinaryActivation on dnnl where the op is claimed).
    Builder r;
    r.output(r.node("Relu", {r.node(c.op, {r.input(shape), r.input(shape)})}));
    Placement fused = placement;
    if (c.on_dnnl) fused.on_dnnl.insert("Relu");
    expect_matches_reference(r.graph, {a, bt}, {map(expected, relu)}, fused, c.op + " + Relu");
  }
}

// ---------------------------------------------------------------------------
// GELU's erf form (one eltwise_gelu_erf on dnnl).

TEST(DnnlNan, GeluPatternPropagatesNanAndInf) {
  const Shape shape = {4, 50};
  const Tensor x = with_specials(shape, 71, -5, 5);
  Builder b;
  const ValueId in = b.input(shape);
  const ValueId erf = b.node("Erf", {b.node("Div", {in, b.scalar(1.41421356f)})});
  b.output(b.node("Mul", {b.node("Mul", {in, b.node("Add", {erf, b.scalar(1.0f)})}), b.scalar(0.5f)}));
  expect_matches_reference(b.graph, {x}, {map(to_doubles(x), gelu)}, {{"Erf"}, {}}, "GELU (erf form)");
}

// ---------------------------------------------------------------------------
// Reductions (native with the default backends too: oneDNN claims none).

TEST(DnnlNan, ReductionsPropagateNan) {
  // Axis 1 of [3, 37, 20] reduces columns, axis 2 rows (16 lanes and a tail), axes {0, 2} a permuted copy.
  const Shape shape = {3, 37, 20};
  const Tensor x = with_specials(shape, 81);
  const std::vector<double> xv = to_doubles(x);
  for (const std::vector<int64_t>& axes : {std::vector<int64_t>{1}, std::vector<int64_t>{2}, std::vector<int64_t>{0, 2}}) {
    for (const std::string op : {"ReduceMax", "ReduceMin", "ReduceSum", "ArgMax", "ArgMin"}) {
      const bool arg = op.rfind("Arg", 0) == 0;
      if (arg && axes.size() != 1) continue;
      std::map<std::vector<int64_t>, std::vector<double>> groups;  // kept index -> values in order
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 37; ++j)
          for (int64_t l = 0; l < 20; ++l) {
            std::vector<int64_t> key = {i, j, l};
            for (int64_t a : axes) key[static_cast<size_t>(a)] = 0;
            groups[key].push_back(xv[static_cast<size_t>((i * 37 + j) * 20 + l)]);
          }
      std::vector<double> expected;
      for (const auto& [key, values] : groups) {
        double acc = op == "ReduceMax" ? -kInf : op == "ReduceMin" ? kInf : 0.0;
        int64_t best = 0;
        for (size_t v = 0; v < values.size(); ++v) {
          if (op == "ReduceMax") acc = maximum(acc, values[v]);
          if (op == "ReduceMin") acc = minimum(acc, values[v]);
          if (op == "ReduceSum") acc += values[v];
          // numpy's argmax/argmin: the first NaN, else the first extreme.
          const double cur = values[static_cast<size_t>(best)], cand = values[v];
          if (!std::isnan(cur) && (std::isnan(cand) || (op == "ArgMax" ? cand > cur : cand < cur))) best = static_cast<int64_t>(v);
        }
        expected.push_back(arg ? static_cast<double>(best) : acc);
      }
      Builder b;
      b.opset = 18;
      const ValueId in = b.input(shape);
      ValueId y;
      if (arg) {
        y = b.node(op, {in}, attributes({{"axis", Attribute::of_int(axes[0])}, {"keepdims", Attribute::of_int(1)}}));
      } else {
        y = b.node(op, {in, b.constant(make_int64({static_cast<int64_t>(axes.size())}, axes))});
      }
      b.output(y);
      std::string axes_text;
      for (int64_t a : axes) axes_text += " " + std::to_string(a);
      expect_matches_reference(b.graph, {x}, {expected}, {}, op + " over axes" + axes_text, 1e-5);
    }
  }
}

}  // namespace
}  // namespace tessera::testing

namespace tessera::testing {
namespace {

// ---------------------------------------------------------------------------
// The runtime's non-finite guard: a oneDNN region holding steps that are
// exact only for finite inputs (fused Clip(0, 6), max pooling, softmax) runs
// on dnnl while its inputs are finite and on native when one holds NaN or Inf.

/// Conv 3x3 (pads 1, bias) → Clip(0, 6) → MaxPool 2x2 / 2 → Softmax over the last axis.
std::vector<double> guard_reference(const Tensor& x, const Shape& xs, const Tensor& w, const Shape& ws, const Tensor& bias) {
  const std::vector<double> conv = map(conv2d(to_doubles(x), xs, to_doubles(w), ws, to_doubles(bias), 1),
                                       [](double v) { return clip(v, 0, 6); });
  const int64_t c = ws[0], h = xs[2], wd = xs[3], oh = h / 2, ow = wd / 2;
  std::vector<double> pooled;
  for (int64_t k = 0; k < c; ++k)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double best = -kInf;
        for (int64_t a = 0; a < 2; ++a)
          for (int64_t e = 0; e < 2; ++e) best = maximum(best, conv[static_cast<size_t>((k * h + 2 * i + a) * wd + 2 * j + e)]);
        pooled.push_back(best);
      }
  std::vector<double> y;
  for (size_t row = 0; row < pooled.size(); row += static_cast<size_t>(ow)) {
    double m = -kInf, sum = 0;
    for (int64_t j = 0; j < ow; ++j) m = maximum(m, pooled[row + static_cast<size_t>(j)]);
    for (int64_t j = 0; j < ow; ++j) sum += std::exp(pooled[row + static_cast<size_t>(j)] - m);
    for (int64_t j = 0; j < ow; ++j) y.push_back(std::exp(pooled[row + static_cast<size_t>(j)] - m) / sum);
  }
  return y;
}

int64_t count_kind(const std::vector<double>& v, bool (*pick)(double)) {
  return static_cast<int64_t>(std::count_if(v.begin(), v.end(), pick));
}

TEST(DnnlNanGuard, FiniteInputsRunOnDnnlNonFiniteOnNative) {
  const Shape xs = {1, 3, 12, 16}, ws = {8, 3, 3, 3};
  const Tensor w = random_float(ws, 91), bias = random_float({8}, 92);
  Builder b;
  const ValueId conv = b.node("Conv", {b.input(xs), b.constant(w), b.constant(bias)},
                              attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}, {"kernel_shape", Attribute::of_ints({3, 3})}}));
  const ValueId clipped = b.node("Clip", {conv, b.scalar(0), b.scalar(6)});
  const ValueId pooled = b.node("MaxPool", {clipped}, attributes({{"kernel_shape", Attribute::of_ints({2, 2})},
                                                                  {"strides", Attribute::of_ints({2, 2})}}));
  b.output(b.node("Softmax", {pooled}, attributes({{"axis", Attribute::of_int(-1)}})));
  std::unique_ptr<CompiledModel> model = compile_on(b.graph, {"dnnl", "native"});
  ASSERT_EQ(model->regions().size(), 1u);
  ASSERT_EQ(model->regions()[0].backend, "dnnl");
  for (const NodePlacement& p : model->placement()) EXPECT_EQ(p.backend, "dnnl") << p.node_name;

  // Scaled up so that the Clip's 0 and 6 and the pooling's maximum all matter.
  Tensor finite = random_float(xs, 93);
  for (int64_t i = 0; i < finite.numel(); ++i) finite.as<float>()[i] *= 3;
  struct Trial {
    std::string what;
    std::vector<std::pair<int64_t, float>> plant;  // element, value
    int64_t fallbacks;
  };
  const int64_t hw = xs[2] * xs[3];
  const std::vector<Trial> trials = {
      {"finite", {}, 0},
      {"one NaN pixel", {{1 * hw + 5 * xs[3] + 7, NAN}}, 1},
      {"one +Inf pixel", {{0 * hw + 2 * xs[3] + 2, INFINITY}}, 1},
      {"-Inf and NaN", {{2 * hw + 9 * xs[3] + 12, -INFINITY}, {hw - 1, NAN}}, 1},
  };
  for (const Trial& trial : trials) {
    SCOPED_TRACE(trial.what);
    Tensor x = finite.clone();
    for (const auto& [at, value] : trial.plant) x.as<float>()[at] = value;
    const std::vector<double> expected = guard_reference(x, xs, w, ws, bias);
    // A planted NaN must reach the output (else the trial shows nothing); a lone
    // +Inf pixel gives ±Inf convolutions that Clip bounds, so finite outputs.
    if (trial.what.find("NaN") != std::string::npos) {
      EXPECT_GT(count_kind(expected, [](double v) { return std::isnan(v); }), 0);
    }
    RunProfile profile;
    const std::vector<Tensor> outputs = model->run({x.view()}, {}, &profile);
    ASSERT_EQ(outputs.size(), 1u);
    expect_same_values(outputs[0], expected, trial.what);
    ASSERT_EQ(profile.region_fallbacks.size(), 1u);
    EXPECT_EQ(profile.region_fallbacks[0], trial.fallbacks);
  }
}

TEST(DnnlNanGuard, ConcurrentRunsCompileTheFallbackOnce) {
  // Several threads hit the lazily compiled native fallback at once; each gets its own values.
  const Shape xs = {2, 5, 33};
  Builder b;
  b.output(b.node("Softmax", {b.node("Max", {b.input(xs), b.input(xs)})}, attributes({{"axis", Attribute::of_int(-1)}})));
  std::unique_ptr<CompiledModel> model = compile_on(b.graph, {"dnnl", "native"});
  ASSERT_EQ(model->regions().size(), 1u);
  ASSERT_EQ(model->regions()[0].backend, "dnnl");
  constexpr int kThreads = 4;
  std::vector<Tensor> a, c;
  std::vector<std::vector<double>> expected;
  for (int t = 0; t < kThreads; ++t) {
    a.push_back(t % 2 ? random_float(xs, 200 + t) : with_specials(xs, 200 + static_cast<uint32_t>(t)));
    c.push_back(random_float(xs, 300 + t));
    std::vector<double> m(static_cast<size_t>(a[t].numel()));
    for (size_t i = 0; i < m.size(); ++i) m[i] = maximum(a[t].double_at(static_cast<int64_t>(i)), c[t].double_at(static_cast<int64_t>(i)));
    std::vector<double> y;
    for (size_t row = 0; row < m.size(); row += 33) {
      double top = -kInf, sum = 0;
      for (size_t j = 0; j < 33; ++j) top = maximum(top, m[row + j]);
      for (size_t j = 0; j < 33; ++j) sum += std::exp(m[row + j] - top);
      for (size_t j = 0; j < 33; ++j) y.push_back(std::exp(m[row + j] - top) / sum);
    }
    expected.push_back(std::move(y));
  }
  std::vector<std::vector<Tensor>> outputs(kThreads);
  std::vector<RunProfile> profiles(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int repeat = 0; repeat < 3; ++repeat) outputs[t] = model->run({a[t].view(), c[t].view()}, {}, &profiles[t]);
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(outputs[t].size(), 1u);
    expect_same_values(outputs[t][0], expected[t], "thread " + std::to_string(t));
    EXPECT_EQ(profiles[t].region_fallbacks[0], t % 2 ? 0 : 3) << "thread " << t;
  }
}

TEST(DnnlNanGuard, NanMadeInsideFromFiniteInputsRunsAgainOnNative) {
  // Floor (native) -> Mul(10) -> Sub(itself) -> STEP (dnnl) -> Floor (native): a
  // finite 3e38 overflows to Inf in the Mul, Inf - Inf is NaN, and oneDNN's
  // relu, clip and max pooling would turn that NaN into 0. The region's input
  // is an intermediate of the run, which the rerun on native reads again.
  struct Case {
    std::string op;
    AttributeMap attrs;
    bool clip;
  };
  const std::vector<Case> cases = {
      {"Relu", {}, false},
      {"Clip", {}, true},
      {"MaxPool", attributes({{"kernel_shape", Attribute::of_ints({2, 2})}, {"strides", Attribute::of_ints({2, 2})}}), false},
  };
  const Shape xs = {1, 16, 64, 128};  // large enough that oneDNN shares each step between the threads
  for (const Case& c : cases) {
    for (int threads : {1, 2}) {
      SCOPED_TRACE(c.op + " at " + std::to_string(threads) + " threads");
      Builder b;
      const ValueId t = b.node("Floor", {b.input(xs)});
      const ValueId a = b.node("Mul", {t, b.scalar(10)});
      const ValueId d = b.node("Sub", {a, a});
      const ValueId f = c.clip ? b.node("Clip", {d, b.scalar(0), b.scalar(6)}) : b.node(c.op, {d}, c.attrs);
      b.output(b.node("Floor", {f}));
      CompileOptions options;
      options.backends = {"dnnl", "native"};
      options.num_threads = threads;
      std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
      for (const NodePlacement& p : model->placement()) {
        EXPECT_EQ(p.backend, p.op_type == "Floor" ? "native" : "dnnl") << p.node_name;
      }
      size_t dnnl_region = model->regions().size();
      for (size_t r = 0; r < model->regions().size(); ++r) {
        if (model->regions()[r].backend == "dnnl") dnnl_region = r;
      }
      ASSERT_LT(dnnl_region, model->regions().size());

      Tensor x = random_float(xs, 501);
      for (int64_t i = 0; i < x.numel(); ++i) x.as<float>()[i] *= 1000;
      // Overflowing values near the start, then near the end only (the
      // second thread's share: a guard that read one thread's flags misses it).
      const int64_t n = x.numel();
      const std::vector<std::vector<std::pair<int64_t, float>>> trials = {
          {}, {{5, 3e38f}, {161, -3e38f}}, {{n - 1, 2e38f}, {n - 200, 3e38f}}};
      for (const auto& planted : trials) {
        const bool plant = !planted.empty();
        Tensor x_trial = x.clone();
        // Large but finite values elsewhere: x * 10 stays finite, so no flag is raised.
        x_trial.as<float>()[17] = 1e37f;
        for (const auto& [at, value] : planted) x_trial.as<float>()[at] = value;
        // The reference in float, as the model computes: floor, times 10 (3e38 * 10 is +Inf), minus itself.
        std::vector<double> diff(static_cast<size_t>(n));
        for (size_t i = 0; i < diff.size(); ++i) {
          const float scaled = std::floor(x_trial.as<float>()[i]) * 10.0f;
          diff[i] = static_cast<double>(scaled - scaled);
        }
        std::vector<double> expected;
        if (c.op == "MaxPool") {
          for (int64_t ch = 0; ch < xs[1]; ++ch) {
            for (int64_t i = 0; i < xs[2] / 2; ++i) {
              for (int64_t j = 0; j < xs[3] / 2; ++j) {
                double m = -kInf;
                for (int64_t di = 0; di < 2; ++di) {
                  for (int64_t dj = 0; dj < 2; ++dj) {
                    m = maximum(m, diff[static_cast<size_t>((ch * xs[2] + 2 * i + di) * xs[3] + 2 * j + dj)]);
                  }
                }
                expected.push_back(std::floor(m));
              }
            }
          }
        } else {
          expected = map(diff, [&](double v) { return std::floor(c.clip ? clip(v, 0, 6) : relu(v)); });
        }
        EXPECT_EQ(count_kind(expected, [](double v) { return std::isnan(v); }), static_cast<int64_t>(planted.size()));
        RunProfile profile;
        const std::vector<Tensor> outputs = model->run({x_trial.view()}, {}, &profile);
        ASSERT_EQ(outputs.size(), 1u);
        expect_same_values(outputs[0], expected, plant ? "with 3e38 planted" : "finite, no overflow");
        EXPECT_EQ(profile.region_fallbacks[dnnl_region], plant ? 1 : 0);
      }
    }
  }
}

TEST(DnnlNanGuard, NonFiniteConstantAlwaysRunsOnNative) {
  // Max with a constant holding +Inf and NaN: oneDNN's max would drop them; finite inputs still fall back.
  const Shape xs = {4, 19};
  Tensor k = random_float(xs, 401);
  k.as<float>()[3] = INFINITY;
  k.as<float>()[40] = NAN;
  Builder b;
  b.output(b.node("Max", {b.input(xs), b.constant(k)}));
  std::unique_ptr<CompiledModel> model = compile_on(b.graph, {"dnnl", "native"});
  ASSERT_EQ(model->regions().size(), 1u);
  ASSERT_EQ(model->regions()[0].backend, "dnnl");
  const Tensor x = random_float(xs, 402);
  std::vector<double> expected(static_cast<size_t>(x.numel()));
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = maximum(x.double_at(static_cast<int64_t>(i)), k.double_at(static_cast<int64_t>(i)));
  RunProfile profile;
  const std::vector<Tensor> outputs = model->run({x.view()}, {}, &profile);
  expect_same_values(outputs[0], expected, "Max with a non-finite constant");
  EXPECT_EQ(profile.region_fallbacks[0], 1);
}

}  // namespace
}  // namespace tessera::testing
