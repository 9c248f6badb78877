// --precision bf16 on the oneDNN backend. References are independent of the
// code under test: the native backend in float32, once on the unrounded
// operands (the bound a user sees) and once on operands rounded to bfloat16
// here (round to nearest even, written out below): a convolution or matmul
// that reads bf16 operands and accumulates in float32 must match the latter
// to float32 summation noise, and differ from the former by the rounding,
// so a step that silently stayed float32 fails as surely as a wrong one.
// Also: the core's choice of nodes (final layer, non-float operands), the
// report's precision per node, artifacts, bf16 intermediates between
// convolutions (no conversion in between), and the float32 fallback with a
// warning where no backend runs bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

#include "backends/dnnl/dnnl_internal.h"
#include "passes/precision.h"
#include "report/placement_report.h"
#include "runtime/backend_registry.h"
#include "runtime/session.h"
#include "cpu_isa.h"
#include "expect_error.h"
#include "graph_builder.h"
#include "test_util.h"

namespace tessera::testing {
namespace {

using Builder = GraphBuilder;

float round_to_bf16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits += 0x7FFFu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  bits &= 0xFFFF0000u;
  float y;
  std::memcpy(&y, &bits, 4);
  return y;
}

Tensor rounded(const Tensor& t) {
  std::vector<float> values(t.as<float>(), t.as<float>() + t.numel());
  for (float& v : values) v = round_to_bf16(v);
  return make_float(t.shape(), values);
}

Tensor uniform(Shape shape, uint32_t seed, float scale = 1.0f) {
  Tensor t = random_float(std::move(shape), seed);
  std::vector<float> values(t.as<float>(), t.as<float>() + t.numel());
  for (float& v : values) v *= scale;
  return make_float(t.shape(), values);
}

std::unique_ptr<CompiledModel> compile_with(const Graph& graph, std::vector<std::string> backends, const std::string& precision) {
  CompileOptions options;
  options.backends = std::move(backends);
  options.precision = parse_precision(precision);
  return CompiledModel::compile(graph, options);
}

Tensor run_one(const CompiledModel& model, const std::vector<Tensor>& feeds) {
  std::vector<TensorView> views;
  for (const Tensor& t : feeds) views.push_back(t.view());
  std::vector<Tensor> outputs = model.run(views);
  EXPECT_EQ(outputs.size(), 1u);
  return std::move(outputs[0]);
}

struct Errors {
  double max_abs = 0, max_ref = 0, cosine = 0;
};

Errors compare(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.shape(), expected.shape());
  Errors e;
  double dot = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < expected.numel(); ++i) {
    const double a = actual.double_at(i), b = expected.double_at(i);
    e.max_abs = std::max(e.max_abs, std::fabs(a - b));
    e.max_ref = std::max(e.max_ref, std::fabs(b));
    dot += a * b;
    aa += a * a;
    bb += b * b;
  }
  e.cosine = dot / std::sqrt(aa * bb);
  return e;
}

/// Elementwise |a - b| <= atol + rtol |b|.
void expect_close(const Tensor& actual, const Tensor& expected, double atol, double rtol, const std::string& what) {
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  int failures = 0;
  for (int64_t i = 0; i < expected.numel() && failures < 5; ++i) {
    const double a = actual.double_at(i), b = expected.double_at(i);
    if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
      ADD_FAILURE() << what << " element " << i << ": " << a << " against " << b;
      ++failures;
    }
  }
}

const NodePlacement& placement_of(const CompiledModel& model, const std::string& op_type, int nth = 0) {
  for (const NodePlacement& p : model.placement()) {
    if (p.op_type == op_type && nth-- == 0) return p;
  }
  throw std::runtime_error("no " + op_type + " node");
}

TEST(PrecisionPolicy, ParsesTheThreeSettingsAndNamesThemOnError) {
  EXPECT_FALSE(parse_precision("fp32").bf16);
  EXPECT_TRUE(parse_precision("bf16").bf16);
  EXPECT_FALSE(parse_precision("bf16").final_layer);
  EXPECT_TRUE(parse_precision("bf16-all").final_layer);
  EXPECT_EQ(precision_text(parse_precision("bf16-all")), "bf16-all");
  EXPECT_USER_ERROR(parse_precision("int4"), "unknown precision 'int4'");
  EXPECT_USER_ERROR(parse_precision(""), "known: fp32");
}

/// Conv → Relu → Conv → Gemm → Softmax: the Gemm is the final layer (only a
/// Softmax follows it); a MatMul of integers is not reduced.
TEST(PrecisionPolicy, MarksConvolutionsAndMatmulsButNotTheFinalLayerOrIntegers) {
  Builder b;
  const ValueId x = b.input({1, 4, 5, 5});
  const ValueId c1 = b.node("Conv", {x, b.constant(uniform({4, 4, 3, 3}, 1))});
  const ValueId r1 = b.node("Relu", {c1});
  const ValueId c2 = b.node("Conv", {r1, b.constant(uniform({2, 4, 3, 3}, 2))});
  const ValueId flat = b.node("Flatten", {c2});
  const ValueId fc = b.node("Gemm", {flat, b.constant(uniform({2, 3}, 3))});
  b.output(b.node("Softmax", {fc}));
  Graph& g = b.graph;
  for (Node& node : g.nodes) {
    for (ValueId out : node.outputs) g.value(out).type = TensorType::make(DType::kFloat32, {1});
  }
  g.value(x).type = TensorType::make(DType::kFloat32, {1, 4, 5, 5});
  const ValueId i = b.input("i", {2, 2});
  g.value(i).type = TensorType::make(DType::kInt32, {2, 2});
  const ValueId mm = b.node("MatMul", {i, i});
  g.value(mm).type = TensorType::make(DType::kInt32, {2, 2});
  const ValueId conv_after = b.node("Conv", {x, b.constant(uniform({1, 4, 1, 1}, 4))});
  g.value(conv_after).type = TensorType::make(DType::kFloat32, {1, 1, 5, 5});
  b.output(b.node("Add", {conv_after, conv_after}));
  g.value(g.outputs.back()).type = TensorType::make(DType::kFloat32, {1, 1, 5, 5});
  b.output(b.node("Relu", {mm}));

  std::vector<char> final_layer;
  const std::vector<char> marked = bf16_nodes(g, parse_precision("bf16"), &final_layer);
  std::vector<std::string> reduced, kept;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (marked[n]) reduced.push_back(g.nodes[n].op_type + std::to_string(n));
    if (final_layer[n]) kept.push_back(g.nodes[n].op_type + std::to_string(n));
  }
  EXPECT_EQ(reduced, (std::vector<std::string>{"Conv0", "Conv2"}));
  EXPECT_EQ(kept, (std::vector<std::string>{"Gemm4", "Conv7"})) << "final layers: the Gemm and the Conv before the Add";
  const std::vector<char> all = bf16_nodes(g, parse_precision("bf16-all"));
  EXPECT_TRUE(all[4] && all[7]);
  EXPECT_FALSE(all[6]) << "the integer MatMul";
  const std::vector<char> none = bf16_nodes(g, parse_precision("fp32"));
  EXPECT_EQ(std::count(none.begin(), none.end(), 1), 0);
}

/// On a CPU without AVX512_BF16 (or with oneDNN capped below it) the same
/// graphs must run in float32 on oneDNN, each Conv/MatMul/Gemm saying why,
/// with one warning naming the ISA, and compute what float32 computes.
void expect_float32_fallback(const Graph& graph, const std::vector<Tensor>& feeds) {
  std::unique_ptr<CompiledModel> model = compile_with(graph, {"dnnl"}, "bf16-all");
  int checked = 0;
  for (const NodePlacement& p : model->placement()) {
    if (p.op_type != "Conv" && p.op_type != "MatMul" && p.op_type != "Gemm") continue;
    ++checked;
    EXPECT_EQ(p.backend, "dnnl") << p.node_name;
    EXPECT_EQ(p.precision, "") << p.node_name;
    EXPECT_NE(p.precision_note.find("without AVX512_BF16"), std::string::npos) << p.precision_note;
  }
  EXPECT_GT(checked, 0);
  ASSERT_EQ(model->warnings().size(), 1u);
  EXPECT_NE(model->warnings()[0].find("without AVX512_BF16"), std::string::npos) << model->warnings()[0];
  std::vector<TensorView> views;
  for (const Tensor& t : feeds) views.push_back(t.view());
  const std::vector<Tensor> actual = model->run(views);
  const std::vector<Tensor> expected = compile_with(graph, {"native"}, "fp32")->run(views);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) expect_close(actual[i], expected[i], 1e-5, 1e-5, "float32 fallback");
}

class DnnlBf16 : public ::testing::Test {
 protected:
  // Tuning off: a 3x3 convolution may otherwise measure faster in float32 (Winograd) and stay
  // float32, which these tests would read as bf16 not being used.
  void TearDown() override { ::unsetenv("TESSERA_DNNL_TUNE"); }
  void SetUp() override {
    ::setenv("TESSERA_DNNL_TUNE", "0", 1);
    // The backend's own detection against /proc/cpuinfo and the ONEDNN_MAX_CPU_ISA cap. Where
    // the CPU has no bf16, each test checks the float32 fallback on its graph instead.
    bf16_ = cpu_isa::dnnl_bf16();
    EXPECT_EQ(dnnl_backend::cpu_has_native_bf16(), bf16_) << "the backend misreads this CPU's bf16 support";
  }
  bool bf16_ = false;
};

/// One convolution with bias (bf16-all, so the final layer is reduced too).
TEST_F(DnnlBf16, ConvolutionReadsBf16OperandsAndAccumulatesInFloat32) {
  for (int64_t channels : {3, 16, 40}) {
    SCOPED_TRACE(std::to_string(channels) + " channels");
    const Tensor x = uniform({2, channels, 9, 8}, 11);
    const Tensor w = uniform({24, channels, 3, 3}, 12);
    const Tensor bias = uniform({24}, 13);
    auto graph_of = [&](const Tensor& weights) {
      Builder b;
      const ValueId in = b.input({2, channels, 9, 8});
      b.output(b.node("Conv", {in, b.constant(weights), b.constant(bias)},
                      attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}})));
      return b.graph;
    };
    if (!bf16_) {
      expect_float32_fallback(graph_of(w), {x});
      continue;
    }
    std::unique_ptr<CompiledModel> model = compile_with(graph_of(w), {"dnnl"}, "bf16-all");
    EXPECT_EQ(placement_of(*model, "Conv").backend, "dnnl");
    EXPECT_EQ(placement_of(*model, "Conv").precision, "bf16");
    const Tensor actual = run_one(*model, {x});
    const Tensor exact_bf16 = run_one(*compile_with(graph_of(rounded(w)), {"native"}, "fp32"), {rounded(x)});
    const Tensor float32 = run_one(*compile_with(graph_of(w), {"native"}, "fp32"), {x});
    expect_close(actual, exact_bf16, 1e-5, 1e-4, "against the bf16-rounded reference");
    const Errors e = compare(actual, float32);
    EXPECT_GT(e.max_abs, 1e-4 * e.max_ref) << "no difference from float32: the operands were not rounded";
    EXPECT_LT(e.max_abs, 2e-2 * e.max_ref);
    EXPECT_GT(e.cosine, 0.9999);
  }
}

/// MatMul with constant weights of rank 3 (rows collapsed), a computed
/// second operand, and Gemm with transB and a bias.
TEST_F(DnnlBf16, MatmulsAndGemmReadBf16Operands) {
  const Tensor a = uniform({2, 7, 32}, 21);
  const Tensor w = uniform({32, 24}, 22);
  const Tensor g_w = uniform({10, 32}, 23);
  const Tensor g_c = uniform({10}, 24);
  auto collapsed = [&](const Tensor& weights) {
    Builder b;
    b.output(b.node("MatMul", {b.input({2, 7, 32}), b.constant(weights)}));
    return b.graph;
  };
  auto batched = [&] {
    Builder b;
    const ValueId p = b.input({2, 7, 32});
    const ValueId q = b.input({2, 32, 5});
    b.output(b.node("MatMul", {p, q}));
    return b.graph;
  };
  auto gemm = [&](const Tensor& weights) {
    Builder b;
    b.output(b.node("Gemm", {b.input({7, 32}), b.constant(weights), b.constant(g_c)},
                    attributes({{"transB", Attribute::of_int(1)}})));
    return b.graph;
  };
  if (!bf16_) {
    expect_float32_fallback(collapsed(w), {a});
    expect_float32_fallback(batched(), {a, uniform({2, 32, 5}, 25)});
    expect_float32_fallback(gemm(g_w), {uniform({7, 32}, 26)});
    return;
  }
  {
    std::unique_ptr<CompiledModel> model = compile_with(collapsed(w), {"dnnl"}, "bf16-all");
    EXPECT_EQ(placement_of(*model, "MatMul").precision, "bf16");
    const Tensor actual = run_one(*model, {a});
    expect_close(actual, run_one(*compile_with(collapsed(rounded(w)), {"native"}, "fp32"), {rounded(a)}), 1e-5, 1e-4,
                 "collapsed MatMul");
    const Errors e = compare(actual, run_one(*compile_with(collapsed(w), {"native"}, "fp32"), {a}));
    EXPECT_GT(e.max_abs, 1e-4 * e.max_ref);
  }
  {
    const Tensor q = uniform({2, 32, 5}, 25);
    std::unique_ptr<CompiledModel> model = compile_with(batched(), {"dnnl"}, "bf16-all");
    EXPECT_EQ(placement_of(*model, "MatMul").precision, "bf16");
    const Tensor actual = run_one(*model, {a, q});
    expect_close(actual, run_one(*compile_with(batched(), {"native"}, "fp32"), {rounded(a), rounded(q)}), 1e-5, 1e-4,
                 "MatMul of two computed operands");
  }
  {
    const Tensor x = uniform({7, 32}, 26);
    std::unique_ptr<CompiledModel> model = compile_with(gemm(g_w), {"dnnl"}, "bf16-all");
    EXPECT_EQ(placement_of(*model, "Gemm").precision, "bf16");
    const Tensor actual = run_one(*model, {x});
    expect_close(actual, run_one(*compile_with(gemm(rounded(g_w)), {"native"}, "fp32"), {rounded(x)}), 1e-5, 1e-4, "Gemm");
  }
}

/// A residual CNN ending in a classifier, under bf16: every Conv in bf16, the
/// final Gemm in float32 (with the reason in the placement), the output close
/// to float32; the artifact keeps the precision and the same bytes.
TEST_F(DnnlBf16, ResidualNetworkKeepsTheFinalLayerInFloat32AndSurvivesAnArtifact) {
  Builder b;
  const int64_t c = 32;
  const ValueId x = b.input({1, 8, 14, 14});
  const ValueId c1 = b.node("Conv", {x, b.constant(uniform({c, 8, 3, 3}, 31, 0.4f)), b.constant(uniform({c}, 32))},
                            attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}}));
  const ValueId r1 = b.node("Relu", {c1});
  const ValueId c2 = b.node("Conv", {r1, b.constant(uniform({c, c, 1, 1}, 33, 0.3f))});
  const ValueId c3 = b.node("Conv", {c2, b.constant(uniform({c, c, 3, 3}, 34, 0.1f))},
                            attributes({{"pads", Attribute::of_ints({1, 1, 1, 1})}}));
  const ValueId sum = b.node("Add", {c3, r1});
  const ValueId r2 = b.node("Relu", {sum});
  const ValueId pooled = b.node("GlobalAveragePool", {r2});
  const ValueId flat = b.node("Flatten", {pooled});
  b.output(b.node("Gemm", {flat, b.constant(uniform({10, c}, 35)), b.constant(uniform({10}, 36))},
                  attributes({{"transB", Attribute::of_int(1)}})));
  const Tensor input = uniform({1, 8, 14, 14}, 37);
  if (!bf16_) return expect_float32_fallback(b.graph, {input});

  std::unique_ptr<CompiledModel> model = compile_with(b.graph, {"dnnl", "native"}, "bf16");
  int bf16_convs = 0;
  for (const NodePlacement& p : model->placement()) {
    if (p.op_type == "Conv") {
      EXPECT_EQ(p.precision, "bf16") << p.node_name;
      bf16_convs += p.precision == "bf16";
    }
  }
  EXPECT_EQ(bf16_convs, 3);
  const NodePlacement& fc = placement_of(*model, "Gemm");
  EXPECT_EQ(fc.precision, "");
  EXPECT_NE(fc.precision_note.find("final layer"), std::string::npos) << fc.precision_note;
  EXPECT_TRUE(model->warnings().empty());
  const std::string table = render_report_table(model->placement_report("residual"));
  EXPECT_NE(table.find("3 nodes compute in bf16 with float32 accumulation (Conv 3)"), std::string::npos) << table;

  const Tensor actual = run_one(*model, {input});
  const Tensor float32 = run_one(*compile_with(b.graph, {"native"}, "fp32"), {input});
  const Errors e = compare(actual, float32);
  EXPECT_GT(e.cosine, 0.999);
  EXPECT_LT(e.max_abs, 3e-2 * e.max_ref);
  EXPECT_GT(e.max_abs, 0.0) << "identical to float32: bf16 was not used";

  const std::string path =
      (std::filesystem::temp_directory_path() / ("tessera_bf16_test_" + std::to_string(::getpid()) + ".tsr")).string();
  model->save(path);
  std::unique_ptr<CompiledModel> loaded = CompiledModel::load(path, CompileOptions{});
  CompileOptions asking;
  asking.precision = parse_precision("bf16");
  EXPECT_USER_ERROR(CompiledModel::load(path, asking), "precision were fixed");
  std::filesystem::remove(path);
  EXPECT_EQ(placement_of(*loaded, "Conv", 2).precision, "bf16");
  const Tensor again = run_one(*loaded, {input});
  EXPECT_EQ(std::memcmp(again.data(), actual.data(), actual.nbytes()), 0) << "the artifact computes other bytes";
}

/// Conv → Conv in one region: the first writes its output in bf16 for the
/// second to read as it is (no conversion step in between); a value also read
/// by a float32 op, or leaving the region, stays float32.
TEST_F(DnnlBf16, ConvolutionsHandBf16ValuesToEachOtherWithoutConversions) {
  Graph g;
  auto value = [&](Shape shape) {
    return g.add_value("v" + std::to_string(g.values.size()), TensorType::make(DType::kFloat32, std::move(shape)));
  };
  auto conv = [&](ValueId in, ValueId w, Shape out_shape) {
    Node node;
    node.name = "conv" + std::to_string(g.nodes.size());
    node.op_type = "Conv";
    node.opset = 17;
    node.inputs = {in, w};
    node.outputs = {value(std::move(out_shape))};
    g.nodes.push_back(std::move(node));
    return g.nodes.back().outputs[0];
  };
  const ValueId x = value({1, 16, 6, 6});
  g.inputs = {x};
  const ValueId w1 = g.add_constant("w1", uniform({16, 16, 1, 1}, 41));
  const ValueId w2 = g.add_constant("w2", uniform({16, 16, 1, 1}, 42));
  const ValueId w3 = g.add_constant("w3", uniform({16, 16, 1, 1}, 43));
  const ValueId y1 = conv(x, w1, {1, 16, 6, 6});
  const ValueId y2 = conv(y1, w2, {1, 16, 6, 6});
  const ValueId y3 = conv(y2, w3, {1, 16, 6, 6});
  g.outputs = {y2, y3};  // y2 leaves the region: float32; y1 is read by conv 1 only: bf16
  if (!bf16_) return expect_float32_fallback(g, {uniform({1, 16, 6, 6}, 44)});
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  const dnnl_backend::Program program = dnnl_backend::lower_region(g, engine, {1, 1, 1});
  std::vector<const dnnl_backend::Step*> convs;
  for (const dnnl_backend::Step& step : program.steps) {
    if (step.kind == dnnl_backend::StepKind::kConvolution) convs.push_back(&step);
  }
  ASSERT_EQ(convs.size(), 3u);
  auto type_of = [&](int32_t slot) { return program.slots[static_cast<size_t>(slot)].type; };
  EXPECT_EQ(type_of(convs[0]->output), dnnl_backend::SlotType::kBFloat16);
  EXPECT_EQ(convs[1]->inputs[0], convs[0]->output) << "conv 1 reads conv 0's output as it is";
  EXPECT_EQ(type_of(convs[1]->output), dnnl_backend::SlotType::kFloat32) << "a region output";
  EXPECT_EQ(type_of(convs[2]->output), dnnl_backend::SlotType::kFloat32);
  for (const dnnl_backend::Step* step : convs) {
    EXPECT_EQ(type_of(step->inputs[0]), dnnl_backend::SlotType::kBFloat16);
    EXPECT_EQ(type_of(step->inputs[1]), dnnl_backend::SlotType::kBFloat16);
  }
  // Without marks nothing is bf16.
  const dnnl_backend::Program plain = dnnl_backend::lower_region(g, engine);
  for (const dnnl_backend::Slot& slot : plain.slots) EXPECT_EQ(slot.type, dnnl_backend::SlotType::kFloat32);
}

/// A payload that claims a bf16 region input is refused (boundary values are float32).
TEST_F(DnnlBf16, APayloadWithABf16BoundarySlotIsRefused) {
  Builder b;
  b.output(b.node("Conv", {b.input({1, 4, 5, 5}), b.constant(uniform({4, 4, 1, 1}, 51))}));
  if (!bf16_) return expect_float32_fallback(b.graph, {uniform({1, 4, 5, 5}, 53)});
  std::unique_ptr<CompiledModel> model = compile_with(b.graph, {"dnnl"}, "bf16-all");
  std::vector<uint8_t> bytes = model->serialize();
  // Reload is fine as it is ...
  EXPECT_NO_THROW(CompiledModel::load_from_memory(bytes, nullptr, "ok.tsr", CompileOptions{}));
  // ... and the payload parser reads the type byte it wrote.
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  Graph g;
  const ValueId in = g.add_value("in", TensorType::make(DType::kFloat32, {1, 4, 5, 5}));
  g.inputs = {in};
  const ValueId w = g.add_constant("w", uniform({4, 4, 1, 1}, 52));
  Node node;
  node.name = "conv";
  node.op_type = "Conv";
  node.opset = 17;
  node.inputs = {in, w};
  node.outputs = {g.add_value("out", TensorType::make(DType::kFloat32, {1, 4, 5, 5}))};
  g.nodes.push_back(node);
  g.outputs = {node.outputs[0]};
  dnnl_backend::Program program = dnnl_backend::lower_region(g, engine, {1});
  const dnnl_backend::Program parsed = dnnl_backend::parse_program(dnnl_backend::serialize_program(program));
  ASSERT_EQ(parsed.slots.size(), program.slots.size());
  for (size_t s = 0; s < parsed.slots.size(); ++s) EXPECT_EQ(parsed.slots[s].type, program.slots[s].type);
  for (dnnl_backend::Slot& slot : program.slots) {
    if (slot.kind == dnnl_backend::Slot::Kind::kInput) slot.type = dnnl_backend::SlotType::kBFloat16;
  }
  std::unique_ptr<Backend> dnnl = find_backend("dnnl")->make(RegionOptions{});
  EXPECT_USER_ERROR(dnnl->load(g, dnnl_backend::serialize_program(program), RegionOptions{}),
                    "does not match the region's boundary value");
  std::vector<uint8_t> payload = dnnl_backend::serialize_program(program);
  // The first slot's type byte: magic 8, count 4, kind 1, value 4, dims 4 + 8 * rank, tag 4.
  const size_t type_byte = 8 + 4 + 1 + 4 + 4 + 8 * program.slots[0].dims.size() + 4;
  payload[type_byte] = 7;
  EXPECT_USER_ERROR(dnnl_backend::parse_program(payload), "slot data type 7 is unknown");
}

/// Where no backend in the list runs bf16, the model runs float32, each
/// candidate says why, and one warning says so.
TEST(DnnlBf16Fallback, NativeOnlyRunsFloat32WithAWarningAndReasons) {
  Builder b;
  const ValueId x = b.input({1, 4, 6, 6});
  const ValueId c1 = b.node("Conv", {x, b.constant(uniform({4, 4, 3, 3}, 61))});
  b.output(b.node("Conv", {b.node("Relu", {c1}), b.constant(uniform({2, 4, 1, 1}, 62))}));
  std::unique_ptr<CompiledModel> model = compile_with(b.graph, {"native"}, "bf16");
  ASSERT_EQ(model->warnings().size(), 1u);
  EXPECT_NE(model->warnings()[0].find("no node runs in bfloat16"), std::string::npos) << model->warnings()[0];
  EXPECT_NE(model->warnings()[0].find("'native' computes in float32 only"), std::string::npos) << model->warnings()[0];
  const NodePlacement& first = placement_of(*model, "Conv");
  EXPECT_EQ(first.precision, "");
  EXPECT_NE(first.precision_note.find("'native' computes in float32 only"), std::string::npos) << first.precision_note;
  EXPECT_NE(placement_of(*model, "Conv", 1).precision_note.find("final layer"), std::string::npos);
  const Tensor input = uniform({1, 4, 6, 6}, 63);
  const Tensor a = run_one(*model, {input});
  const Tensor ref = run_one(*compile_with(b.graph, {"native"}, "fp32"), {input});
  EXPECT_EQ(std::memcmp(a.data(), ref.data(), a.nbytes()), 0) << "native must ignore the precision";
}

}  // namespace
}  // namespace tessera::testing
