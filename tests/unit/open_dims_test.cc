// Models compiled once with open dims (bind_input_shapes leaves unbound dims
// open): shape specialisation of a graph (ir/specialize_shapes), oneDNN
// regions lowered per input shape at run time (dnnl_open_region.cc) against a
// convolution computed in double at many shapes, the per-shape cache's
// counters and its bound, the native runs at unseen shapes (runtime/shape_admission.cc), the native fallback at shapes oneDNN refuses, bad
// shapes as errors that leave the model usable, and the compile-time probe's
// refusals where this CPU implies them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cpu_isa.h"
#include "graph_builder.h"
#include "ir/error.h"
#include "ir/shape_util.h"
#include "ir/specialize_shapes.h"
#include "runtime/session.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

/// Sets an environment variable for one scope.
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  const char* name_;
};

/// `statement` throws a user error whose message has every part.
void expect_user_error(const std::function<void()>& statement, const std::vector<std::string>& parts) {
  try {
    statement();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUser) << e.what();
    for (const std::string& part : parts) EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

/// A convolution in double, straight from the definition: x[n, cin, h, w], w[cout, cin, k, k], pad k / 2.
std::vector<double> conv_reference(const std::vector<double>& x, int64_t n, int64_t cin, int64_t h, int64_t w,
                                   const Tensor& weights, const Tensor* bias) {
  const int64_t cout = weights.shape()[0], k = weights.shape()[2], pad = k / 2;
  std::vector<double> out(static_cast<size_t>(n * cout * h * w));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < cout; ++o)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j) {
          double sum = bias ? bias->as<float>()[o] : 0.0;
          for (int64_t c = 0; c < cin; ++c)
            for (int64_t a = 0; a < k; ++a)
              for (int64_t e = 0; e < k; ++e) {
                const int64_t y = i + a - pad, z = j + e - pad;
                if (y < 0 || y >= h || z < 0 || z >= w) continue;
                sum += double(weights.as<float>()[((o * cin + c) * k + a) * k + e]) * x[static_cast<size_t>(((b * cin + c) * h + y) * w + z)];
              }
          out[static_cast<size_t>(((b * cout + o) * h + i) * w + j)] = sum;
        }
  return out;
}

/// x[n, 8, h, w] (n, h, w open, named) -> Conv 3x3 (16, bias) -> Relu -> Conv 3x3 (16) -> Relu
/// -> Conv 1x1 (4). The two 3x3 layers after the first have weights of one shape and other values,
/// so a constant shared between per-shape regions under the wrong key shows.
struct ConvModel {
  Tensor w1 = random_uniform({16, 8, 3, 3}, 1, -0.2f, 0.2f), b1 = random_uniform({16}, 2, -0.5f, 0.5f);
  Tensor w2 = random_uniform({16, 16, 3, 3}, 3, -0.1f, 0.1f), w3 = random_uniform({16, 16, 3, 3}, 4, -0.1f, 0.1f);
  Tensor w4 = random_uniform({4, 16, 1, 1}, 5, -0.3f, 0.3f);
  Graph graph;

  ConvModel() {
    GraphBuilder b;
    const ValueId x = b.input("x", {-1, 8, -1, -1});
    b.graph.value(x).type.symbols = {"n", "", "h", "w"};
    const AttributeMap pad = attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}});
    ValueId v = b.node("Relu", {b.node("Conv", {x, b.constant(w1), b.constant(b1)}, pad)});
    v = b.node("Relu", {b.node("Conv", {v, b.constant(w2)}, pad)});
    v = b.node("Relu", {b.node("Conv", {v, b.constant(w3)}, pad)});
    b.output(b.node("Conv", {v, b.constant(w4)}));
    graph = b.graph;
  }

  std::vector<double> reference(const Tensor& x) const {
    const int64_t n = x.shape()[0], h = x.shape()[2], w = x.shape()[3];
    auto relu = [](std::vector<double> v) {
      for (double& e : v) e = std::max(e, 0.0);
      return v;
    };
    std::vector<double> v(x.as<float>(), x.as<float>() + x.numel());
    v = relu(conv_reference(v, n, 8, h, w, w1, &b1));
    v = relu(conv_reference(v, n, 16, h, w, w2, nullptr));
    v = relu(conv_reference(v, n, 16, h, w, w3, nullptr));
    return conv_reference(v, n, 16, h, w, w4, nullptr);
  }
};

void expect_matches(const Tensor& actual, const std::vector<double>& expected) {
  ASSERT_EQ(static_cast<size_t>(actual.numel()), expected.size());
  int failures = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const double a = actual.as<float>()[i];
    // NaN-propagating: a NaN fails the comparison.
    if (!(std::fabs(a - expected[i]) <= 2e-5 + 2e-5 * std::fabs(expected[i])) && failures++ < 5) {
      ADD_FAILURE() << "element " << i << ": " << a << ", expected " << expected[i];
    }
  }
}

TEST(OpenDims, SpecializeShapesInfersEveryValueFromTheInputs) {
  GraphBuilder b;
  const ValueId x = b.input("x", {-1, 4});
  const ValueId y = b.node("Relu", {b.node("MatMul", {x, b.constant(random_uniform({4, 3}, 7, -1, 1))})});
  b.output(y);
  const Graph graph = b.graph;
  const Graph five = specialize_shapes(graph, {{5, 4}});
  EXPECT_EQ(five.value(y).type.dims, (Shape{5, 3}));
  EXPECT_TRUE(all_shapes_static(five));
  EXPECT_FALSE(all_shapes_static(graph));
  EXPECT_EQ(graph.value(x).type.dims, (Shape{-1, 4}));  // the original keeps its open dims
  EXPECT_EQ(specialize_shapes(graph, {{0, 4}}).value(y).type.dims, (Shape{0, 3}));
  expect_user_error([&] { specialize_shapes(graph, {{5, 5}}); }, {"input 'x'", "5x5"});
  expect_user_error([&] { specialize_shapes(graph, {{5, 4, 1}}); }, {"input 'x'"});
}

TEST(OpenDims, OneCompileRunsEveryShapeOnOneDnnAndCountsWhatItPrepares) {
  ScopedEnv eager("TESSERA_SHAPE_ADMISSION", "eager");  // every unseen shape prepared (no native run instead)
  const ConvModel m;
  CompileOptions options;
  options.backends = {"dnnl", "native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(m.graph, options);
  ASSERT_EQ(model->inputs()[0].shape, (Shape{-1, 8, -1, -1}));
  EXPECT_EQ(model->inputs()[0].dim_names[0], "n");
  for (const NodePlacement& p : model->placement()) {
    if (p.region >= 0) EXPECT_EQ(p.backend, "dnnl") << p.node_name << ": " << p.why;
  }
  struct Case {
    Shape shape;
    bool new_shape;
  };
  const std::vector<Case> cases = {{{1, 8, 12, 12}, true}, {{2, 8, 7, 9}, true}, {{1, 8, 12, 12}, false},
                                   {{3, 8, 1, 1}, true},   {{1, 8, 30, 17}, true}, {{2, 8, 7, 9}, false}};
  uint32_t seed = 10;
  for (const Case& c : cases) {
    SCOPED_TRACE(shape_to_string(c.shape));
    const Tensor x = random_uniform(c.shape, seed++, -1, 1);
    RunProfile profile;
    const std::vector<Tensor> out = model->run({x.view()}, {}, &profile);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape(), (Shape{c.shape[0], 4, c.shape[2], c.shape[3]}));
    expect_matches(out[0], m.reference(x));
    EXPECT_EQ(profile.counts.shape_cache_misses, c.new_shape ? 1 : 0);
    EXPECT_EQ(profile.counts.shape_cache_hits, c.new_shape ? 0 : 1);
    EXPECT_EQ(profile.counts.shape_fallbacks, 0);
    EXPECT_EQ(c.new_shape, profile.counts.shape_prepare_milliseconds > 0);
  }
  // An empty batch: oneDNN refuses empty tensors, so the region's nodes run on native.
  RunProfile profile;
  const Tensor empty(DType::kFloat32, {0, 8, 5, 5});
  const std::vector<Tensor> out = model->run({empty.view()}, {}, &profile);
  EXPECT_EQ(out[0].shape(), (Shape{0, 4, 5, 5}));
  EXPECT_EQ(profile.counts.shape_fallbacks, 1);
  // A fixed dim that differs, or another rank: errors naming the input; the model still runs.
  const Tensor seven = random_uniform({1, 7, 4, 4}, 99, -1, 1);
  expect_user_error([&] { model->run({seven.view()}); }, {"input 'x'", "1x7x4x4"});
  const Tensor flat = random_uniform({8, 4}, 98, -1, 1);
  expect_user_error([&] { model->run({flat.view()}); }, {"input 'x'"});
  const Tensor again = random_uniform({1, 8, 6, 5}, 97, -1, 1);
  expect_matches(model->run({again.view()})[0], m.reference(again));
}

TEST(OpenDims, AShapeRunAgainAndAgainIsLoweredInFullOnceAndStaysRight) {
  // A shape after the first is lowered quickly (direct convolutions on oneDNN's JIT kernels that are not
  // brgemm-based, cheap to create); the call that brings it to OpenDnnlRegion::kTierUpCalls hits lowers
  // it again in full, once: a cache hit that reports preparation time. Every output matches the double
  // reference, before and after.
  ScopedEnv eager("TESSERA_SHAPE_ADMISSION", "eager");
  ScopedEnv direct("TESSERA_DNNL_TUNE", "0");  // direct convolutions everywhere, whatever the timing says
  const ConvModel m;
  CompileOptions options;
  options.backends = {"dnnl", "native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(m.graph, options);
  const Tensor first = random_uniform({1, 8, 12, 12}, 50, -1, 1);
  expect_matches(model->run({first.view()})[0], m.reference(first));
  const Tensor x = random_uniform({2, 8, 9, 11}, 51, -1, 1);
  const std::vector<double> expected = m.reference(x);
  int prepared_hits = 0, prepared_at = -1;
  for (int call = 0; call < 12; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    RunProfile profile;
    expect_matches(model->run({x.view()}, {}, &profile)[0], expected);
    EXPECT_EQ(profile.counts.shape_cache_misses, call == 0 ? 1 : 0);
    if (call > 0 && profile.counts.shape_prepare_milliseconds > 0) {
      ++prepared_hits;
      prepared_at = call;
    }
  }
  EXPECT_EQ(prepared_hits, 1);
  EXPECT_EQ(prepared_at, 8);  // the eighth hit (kTierUpCalls)
}

TEST(OpenDims, AShapeTheRuntimeAsksToPrepareInFullIsNotLoweredAgain) {
  // The admission (default) prepares the second unseen shape in full (ValueStore::prepare_in_full) and
  // the third quickly: hits of the second never prepare again, the third moves up to the full tier at
  // its kTierUpCalls-th hit. Every output matches the double reference.
  ScopedEnv direct("TESSERA_DNNL_TUNE", "0");  // direct convolutions everywhere: a quick tier exists
  const ConvModel m;
  CompileOptions options;
  options.backends = {"dnnl", "native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(m.graph, options);
  uint32_t seed = 60;
  // The preparation milliseconds a call at `shape` reported, after checking its output.
  auto run = [&](const Shape& shape, int64_t misses) {
    const Tensor x = random_uniform(shape, seed++, -1, 1);
    RunProfile profile;
    expect_matches(model->run({x.view()}, {}, &profile)[0], m.reference(x));
    EXPECT_EQ(profile.counts.shape_cache_misses, misses) << shape_to_string(shape);
    EXPECT_EQ(profile.counts.shape_deferrals, 0) << shape_to_string(shape);
    return profile.counts.shape_prepare_milliseconds;
  };
  run({1, 8, 12, 12}, 1);
  const Shape full = {2, 8, 9, 11}, quick = {1, 8, 7, 10};
  EXPECT_GT(run(full, 1), 0);
  for (int call = 0; call < 12; ++call) EXPECT_EQ(run(full, 0), 0) << "hit " << call + 1;
  EXPECT_GT(run(quick, 1), 0);
  int tiered_at = -1;
  for (int call = 0; call < 12; ++call) {
    if (run(quick, 0) > 0) {
      EXPECT_EQ(tiered_at, -1) << "lowered again at hits " << tiered_at << " and " << call + 1;
      tiered_at = call + 1;
    }
  }
  EXPECT_EQ(tiered_at, 8);  // kTierUpCalls
}

TEST(OpenDims, AnUnseenShapeRunsOnNativeUntilPreparingItIsWorthItAndStaysPreparedAfter) {
  const ConvModel m;
  CompileOptions options;
  options.backends = {"dnnl", "native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(m.graph, options);
  struct Counts {
    int64_t misses, deferrals, hits;
  };
  uint32_t seed = 40;
  auto run = [&](const Shape& shape) {
    SCOPED_TRACE(shape_to_string(shape));
    const Tensor x = random_uniform(shape, seed++, -1, 1);
    RunProfile profile;
    expect_matches(model->run({x.view()}, {}, &profile)[0], m.reference(x));  // whichever ran it
    EXPECT_EQ(profile.counts.shape_fallbacks, 0);
    return Counts{profile.counts.shape_cache_misses, profile.counts.shape_deferrals, profile.counts.shape_cache_hits};
  };
  auto expect = [](const Counts& c, int64_t misses, int64_t deferrals, int64_t hits) {
    EXPECT_EQ(c.misses, misses);
    EXPECT_EQ(c.deferrals, deferrals);
    EXPECT_EQ(c.hits, hits);
  };
  // The first three unseen shapes are prepared (the first may do once what later preparations reuse; the
  // second and third are what a shape costs in full and quickly), the next runs on native (what native
  // costs is measured), and a prepared shape is found prepared.
  expect(run({1, 8, 12, 12}), 1, 0, 0);
  expect(run({1, 8, 11, 12}), 1, 0, 0);
  expect(run({1, 8, 10, 12}), 1, 0, 0);
  expect(run({1, 8, 9, 13}), 0, 1, 0);
  expect(run({1, 8, 12, 12}), 0, 0, 1);
  // From here the choice is by the times measured (tests/unit/shape_admission_test.cc drives it with
  // made-up times): a shape run again and again runs on native until it is prepared, if it is, and is
  // found prepared after; whichever ran, the output is the reference's.
  for (const Shape& shape : {Shape{1, 8, 9, 13}, Shape{2, 8, 5, 7}}) {
    int64_t prepared = 0;
    for (int call = 0; call < 12; ++call) {
      const Counts c = run(shape);
      EXPECT_EQ(c.misses + c.deferrals + c.hits, 1);
      if (prepared) EXPECT_EQ(c.hits, 1) << call;
      if (!prepared) EXPECT_EQ(c.hits, 0) << call;
      prepared += c.misses;
    }
    EXPECT_LE(prepared, 1);
  }
  const ModelStats stats = model->stats();
  EXPECT_EQ(stats.counts.shape_fallbacks, 0);
  EXPECT_GE(stats.counts.shape_deferrals, 1);
  // Eager: every unseen shape prepared at once.
  ScopedEnv eager("TESSERA_SHAPE_ADMISSION", "eager");
  expect(run({1, 8, 4, 21}), 1, 0, 0);
}

TEST(OpenDims, ShapeCacheStaysWithinItsBoundAndEvictsTheLeastRecentlyUsed) {
  ScopedEnv eager("TESSERA_SHAPE_ADMISSION", "eager");
  const ConvModel m;
  CompileOptions options;
  options.backends = {"dnnl", "native"};
  auto misses_running = [](const CompiledModel& model, const Shape& shape) {
    const Tensor x = random_uniform(shape, 5, -1, 1);
    RunProfile profile;
    model.run({x.view()}, {}, &profile);
    return profile.counts.shape_cache_misses;
  };
  const Shape first = {1, 8, 4, 4};
  {
    // 1 MB holds a few of this model's shapes (each keeps its primitives' code, about 450 KB).
    ScopedEnv bound("TESSERA_SHAPE_CACHE_MB", "1");
    std::unique_ptr<CompiledModel> model = CompiledModel::compile(m.graph, options);
    EXPECT_EQ(misses_running(*model, first), 1);
    for (int64_t w = 5; w < 25; ++w) EXPECT_EQ(misses_running(*model, {1, 8, 4, w}), 1);
    EXPECT_EQ(misses_running(*model, {1, 8, 4, 24}), 0);  // the most recent stays
    EXPECT_EQ(misses_running(*model, first), 1);          // the least recent was dropped
  }
  // The default bound keeps them all.
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(m.graph, options);
  EXPECT_EQ(misses_running(*model, first), 1);
  for (int64_t w = 5; w < 25; ++w) misses_running(*model, {1, 8, 4, w});
  EXPECT_EQ(misses_running(*model, first), 0);
}

/// Relu(x w) with x of open rows ("rows") and w constant, compiled on oneDNN + native; the MatMul's
/// backend and its placement's reason and note.
std::unique_ptr<CompiledModel> compile_open_rows_product(const Tensor& w, std::string* backend, std::string* note) {
  GraphBuilder b;
  const ValueId x = b.input("x", {-1, w.shape()[0]});
  b.graph.value(x).type.symbols = {"rows", ""};
  b.output(b.node("Relu", {b.node("MatMul", {x, b.constant(w)})}));
  CompileOptions options;
  options.backends = {"dnnl", "native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
  for (const NodePlacement& p : model->placement()) {
    if (p.op_type == "MatMul") *backend = p.backend, *note = p.why + " " + p.note;
  }
  return model;
}

/// out = Relu(input x w) for input [rows, k] and w [k, n], against a float64 sum.
void expect_relu_of_product(const Tensor& out, const Tensor& input, const Tensor& w) {
  const int64_t rows = input.shape()[0], k = w.shape()[0], n = w.shape()[1];
  ASSERT_EQ(out.shape(), (Shape{rows, n}));
  int failures = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) {
      double sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += double(input.as<float>()[r * k + i]) * w.as<float>()[i * n + c];
      const double expected = std::max(sum, 0.0), actual = out.as<float>()[r * n + c];
      if (!(std::fabs(actual - expected) <= 1e-4 + 1e-4 * std::fabs(expected)) && failures++ < 5) {
        ADD_FAILURE() << "[" << r << ", " << c << "]: " << actual << ", expected " << expected;
      }
    }
}

TEST(OpenDims, ProbeSendsWhatOneDnnRunsSlowlyElsewhereAsThisCpuImplies) {
  // A float32 matmul of open rows against weights too small for open_rows_product (128 x 256): at the
  // probe's 256 rows, below AVX-512 oneDNN 2.6 runs it with gemm:jit, slower than native's packed GEMM,
  // so it is placed on native (as a static compile of that size does); from AVX-512 on oneDNN keeps it.
  const Tensor w = random_uniform({128, 256}, 11, -0.1f, 0.1f);
  std::string matmul_backend, note;
  std::unique_ptr<CompiledModel> model = compile_open_rows_product(w, &matmul_backend, &note);
  if (cpu_isa::dnnl_avx512()) {
    EXPECT_EQ(matmul_backend, "dnnl") << note;
  } else if (cpu_isa::dnnl_avx2()) {
    EXPECT_EQ(matmul_backend, "native") << note;
    EXPECT_NE(note.find("open dims at 256"), std::string::npos) << note;
  }
  // Either way it computes the product, at any number of rows.
  for (int64_t rows : {1, 3, 300}) {
    const Tensor input = random_uniform({rows, 128}, static_cast<uint32_t>(rows), -1, 1);
    SCOPED_TRACE(std::to_string(rows) + " rows");
    expect_relu_of_product(model->run({input.view()})[0], input, w);
  }
}

TEST(OpenDims, ProductsOfOpenRowsAgainstLargeWeightsAreNativesAtEveryRowCount) {
  // From 2^16 weights a float32 product of open rows is native's on every CPU (open_rows_product):
  // its one packed copy serves a decoder's prompt and its single tokens alike, where oneDNN ran the
  // prompt from a copy of its own and its one-row calls fell back to native. No call falls back or
  // compiles anything, and every row count is right.
  for (const Shape& dims : {Shape{256, 256}, Shape{1024, 2048}}) {
    const Tensor w = random_uniform(dims, 12, -0.05f, 0.05f);
    std::string matmul_backend, note;
    std::unique_ptr<CompiledModel> model = compile_open_rows_product(w, &matmul_backend, &note);
    EXPECT_EQ(matmul_backend, "native") << note;
    EXPECT_NE(note.find("with open rows, a product against constant weights"), std::string::npos) << note;
    for (int64_t rows : {1, 2, 5, 70, 1}) {
      SCOPED_TRACE(std::to_string(dims[0]) + " x " + std::to_string(dims[1]) + ", " + std::to_string(rows) + " rows");
      const Tensor input = random_uniform({rows, dims[0]}, static_cast<uint32_t>(rows), -1, 1);
      RunProfile profile;
      const Tensor out = model->run({input.view()}, {}, &profile)[0];
      EXPECT_EQ(profile.counts.fallback_compiles, 0);
      EXPECT_EQ(profile.counts.shape_fallbacks, 0);
      expect_relu_of_product(out, input, w);
    }
  }
  // One weight fewer, or the same weights with static rows: oneDNN keeps it where it has brgemm.
  if (!cpu_isa::dnnl_avx512()) return;
  std::string matmul_backend, note;
  compile_open_rows_product(random_uniform({255, 256}, 13, -0.05f, 0.05f), &matmul_backend, &note);
  EXPECT_EQ(matmul_backend, "dnnl") << note;
  GraphBuilder b;
  const Tensor w = random_uniform({256, 256}, 14, -0.05f, 0.05f);
  b.output(b.node("Relu", {b.node("MatMul", {b.input("x", {64, 256}), b.constant(w)})}));
  CompileOptions options;
  options.backends = {"dnnl", "native"};
  std::unique_ptr<CompiledModel> model = CompiledModel::compile(b.graph, options);
  for (const NodePlacement& p : model->placement()) {
    if (p.op_type == "MatMul") EXPECT_EQ(p.backend, "dnnl") << p.why << " " << p.note;
  }
  const Tensor input = random_uniform({64, 256}, 15, -1, 1);
  expect_relu_of_product(model->run({input.view()})[0], input, w);
}

TEST(OpenDims, UnseenRowCountsRunRightOnOneDnnOrItsFallback) {
  // Weights below open_rows_product's bound (an encoder's small projection) stay on oneDNN from
  // AVX-512 on; native runs the region at the shapes oneDNN has not prepared, whole calls of any length.
  const Tensor w = random_uniform({128, 384}, 13, -0.1f, 0.1f);
  std::string matmul_backend, note;
  std::unique_ptr<CompiledModel> model = compile_open_rows_product(w, &matmul_backend, &note);
  int dnnl_regions = 0;
  for (const RegionSummary& region : model->regions()) dnnl_regions += region.backend == "dnnl";
  if (cpu_isa::dnnl_avx512()) {
    EXPECT_EQ(dnnl_regions, 1) << note;
  }
  // Every call at a new row count (oneDNN's or native's run), right.
  for (int64_t rows : {40, 41, 300, 2, 42, 43, 44}) {
    SCOPED_TRACE(std::to_string(rows) + " rows");
    const Tensor input = random_uniform({rows, 128}, static_cast<uint32_t>(rows), -1, 1);
    expect_relu_of_product(model->run({input.view()})[0], input, w);
  }
}

}  // namespace
}  // namespace tessera::testing
