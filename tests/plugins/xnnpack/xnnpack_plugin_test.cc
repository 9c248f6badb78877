// Tests of the XNNPACK plug-in (plugins/xnnpack/) through its C ABI only: the
// module is dlopened, regions are hand-built tsrp_graph views, and every
// result is compared with the naive loops of reference.h. Also: refusals carry
// reasons, hostile payloads give an error status (never a crash), bad run
// arguments are refused. Path of the module: argv[1] or TESSERA_XNNPACK_PLUGIN_PATH.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "graph_builder.h"
#include "reference.h"

namespace xnnpack_test {
namespace {

const char* g_plugin_path = TESSERA_XNNPACK_PLUGIN_PATH;

const tsrp_plugin* plugin() {
  static Plugin loaded(g_plugin_path);
  return loaded.table;
}

std::string take(tsrp_status* s) {
  if (!s) return "";
  std::string m = s->message.empty() ? "(empty message)" : s->message;
  delete s;
  return m;
}

struct Backend {
  explicit Backend(int threads = 1) {
    tsrp_backend_options options{sizeof(tsrp_backend_options), threads};
    error = take(plugin()->create_backend(&options, &backend));
  }
  ~Backend() { if (backend) plugin()->destroy_backend(backend); }
  tsrp_backend* backend = nullptr;
  std::string error;
};

std::string refusal(const tsrp_graph* g, size_t node) {
  Backend b;
  char reason[512] = {0};
  tsrp_support out{sizeof(tsrp_support), -1, reason, sizeof(reason)};
  EXPECT_EQ(take(plugin()->support(b.backend, g, node, &out)), "");
  return out.supported ? std::string() : std::string(reason);
}

std::vector<uint8_t> compile_bytes(tsrp_backend* backend, const tsrp_graph* g, std::string* error) {
  tsrp_payload payload{sizeof(tsrp_payload), nullptr, 0, nullptr};
  *error = take(plugin()->compile(backend, g, &payload));
  if (!error->empty()) return {};
  const uint8_t* p = static_cast<const uint8_t*>(payload.data);
  std::vector<uint8_t> bytes(p, p + payload.size);
  plugin()->free_payload(backend, payload.owner);
  return bytes;
}

DLTensor dl(HostTensor& t) {
  DLTensor d{};
  d.data = t.data.data();
  d.device = {kDLCPU, 0};
  d.ndim = static_cast<int32_t>(t.dims.size());
  d.dtype = {kDLFloat, 32, 1};
  d.shape = t.dims.data();
  return d;
}

// compile → load → run; outputs shaped as the graph's outputs. Empty on failure (error set).
std::vector<HostTensor> run_graph(const tsrp_graph* g, std::vector<HostTensor> inputs, std::string* error,
                                  int threads = 1, size_t* op_count = nullptr) {
  Backend b(threads);
  std::vector<uint8_t> bytes = compile_bytes(b.backend, g, error);
  if (!error->empty()) return {};
  if (op_count) {  // the payload header (plugins/xnnpack/xnnpack_program.cc): magic, version, tensors, ops
    uint32_t ops = 0;
    std::memcpy(&ops, bytes.data() + 12, 4);
    *op_count = ops;
  }
  tsrp_region* region = nullptr;
  *error = take(plugin()->load(b.backend, g, bytes.data(), bytes.size(), &region));
  if (!error->empty()) return {};
  std::vector<HostTensor> outputs;
  for (size_t i = 0; i < g->output_count; ++i) {
    const tsrp_value* v = g->values[g->outputs[i]];
    HostTensor t{std::vector<int64_t>(v->dims, v->dims + v->rank), {}};
    t.data.assign(count_of(t.dims), std::nanf(""));
    outputs.push_back(std::move(t));
  }
  std::vector<DLTensor> in, out;
  for (HostTensor& t : inputs) in.push_back(dl(t));
  for (HostTensor& t : outputs) out.push_back(dl(t));
  tsrp_run_args args{};
  args.struct_size = sizeof(args);
  args.input_count = in.size();
  args.inputs = in.data();
  args.output_count = out.size();
  args.outputs = out.data();
  *error = take(plugin()->run(region, &args));
  plugin()->release_region(region);
  return outputs;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tolerance = 1e-4f) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= tolerance * (1.0f + std::fabs(want[i])))) {
      if (++bad <= 5) ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

HostTensor random_tensor(std::vector<int64_t> dims, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  HostTensor t{dims, random_values(count_of(dims), seed, lo, hi)};
  return t;
}

TEST(XnnpackPlugin, ExportsItsTable) {
  ASSERT_NE(plugin(), nullptr) << g_plugin_path;
  EXPECT_EQ(plugin()->abi_major, uint32_t(TSRP_ABI_MAJOR));
  EXPECT_STREQ(plugin()->name, "xnnpack");
  EXPECT_STREQ(plugin()->version, "1");
  EXPECT_NE(std::string(plugin()->description), "");
  EXPECT_EQ(plugin()->struct_size, sizeof(tsrp_plugin));
  Backend b;
  ASSERT_EQ(b.error, "");
  EXPECT_EQ(std::string(plugin()->compatibility(b.backend)).rfind("xnnpack-2022", 0), 0u) << plugin()->compatibility(b.backend);
  EXPECT_EQ(plugin()->memory_space(b.backend), nullptr);
  EXPECT_GE(plugin()->pattern_count(b.backend), 4u);
  EXPECT_EQ(plugin()->serial_runs, 1);
}

// One Conv region, checked against the reference; `activation` adds a fused Relu/Clip node.
void check_conv(std::vector<int64_t> xd, std::vector<int64_t> wd, int64_t group, Window2d p, const char* auto_pad,
                std::vector<int64_t> out, bool bias, int threads = 1, std::string activation = "") {
  GraphBuilder g;
  HostTensor x = random_tensor(xd, 1), w = random_tensor(wd, 2);
  std::vector<float> b = bias ? random_values(wd[0], 3) : std::vector<float>();
  const int xi = g.value("x", xd), wi = g.constant("w", wd, w.data), yi = g.value("y", out);
  std::vector<int> inputs = {xi, wi};
  if (bias) inputs.push_back(g.constant("b", {wd[0]}, b));
  const int conv_out = activation.empty() ? yi : g.value("conv", out);
  g.node("Conv", inputs, {conv_out});
  g.attr_int("group", group);
  g.attr_ints("strides", {p.sh, p.sw});
  g.attr_ints("dilations", {p.dh, p.dw});
  if (std::string(auto_pad) == "NOTSET") g.attr_ints("pads", {p.pad_top, p.pad_left, p.pad_bottom, p.pad_right});
  else g.attr_string("auto_pad", auto_pad);
  std::vector<float> want = conv_reference(x, w, b, group, p, out);
  if (activation == "Relu") {
    g.node("Relu", {conv_out}, {yi});
    for (float& v : want) v = std::max(v, 0.0f);
  } else if (activation == "Clip") {
    g.node("Clip", {conv_out, g.constant("lo", {}, {-0.25f}), g.constant("hi", {}, {0.5f})}, {yi});
    for (float& v : want) v = std::min(std::max(v, -0.25f), 0.5f);
  }
  g.inputs({xi});
  g.outputs({yi});
  const tsrp_graph* graph = g.graph();
  EXPECT_EQ(refusal(graph, 0), "");
  std::string error;
  size_t ops = 0;
  std::vector<HostTensor> y = run_graph(graph, {x}, &error, threads, &ops);
  ASSERT_EQ(error, "");
  EXPECT_EQ(ops, 1u) << "the activation is fused into the convolution";
  expect_near(y[0].data, want);
}

TEST(XnnpackPlugin, ConvWithPadsStridesDilations) {
  Window2d p{3, 2, 2, 1, 1, 2, 1, 0, 2, 1};
  // H: (9 + 1 + 2 - 3) / 2 + 1 = 5; W: (8 + 0 + 1 - 3) / 1 + 1 = 7
  check_conv({2, 3, 9, 8}, {4, 3, 3, 2}, 1, p, "NOTSET", {2, 4, 5, 7}, true);
}

TEST(XnnpackPlugin, ConvSameUpperWithoutBiasOnTwoThreads) {
  Window2d p{3, 3, 2, 2, 1, 1, 0, 0, 1, 1};  // SAME_UPPER, 7 → 4: total pad 2 → 1 / 1 ... set from the shape
  p.pad_top = p.pad_left = 1;
  p.pad_bottom = p.pad_right = 1;
  check_conv({1, 4, 7, 7}, {8, 4, 3, 3}, 1, p, "SAME_UPPER", {1, 8, 4, 4}, false, 2);
  Window2d q{2, 2, 1, 1, 1, 1, 0, 0, 1, 1};  // even kernel: SAME_UPPER pads the end, SAME_LOWER the start
  check_conv({1, 2, 5, 5}, {3, 2, 2, 2}, 1, q, "SAME_UPPER", {1, 3, 5, 5}, true);
  q.pad_top = q.pad_left = 1;
  q.pad_bottom = q.pad_right = 0;
  check_conv({1, 2, 5, 5}, {3, 2, 2, 2}, 1, q, "SAME_LOWER", {1, 3, 5, 5}, true);
}

TEST(XnnpackPlugin, GroupedAndDepthwiseConv) {
  Window2d p{3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  check_conv({1, 4, 6, 6}, {6, 2, 3, 3}, 2, p, "NOTSET", {1, 6, 6, 6}, true);
  Window2d d{3, 3, 2, 2, 1, 1, 1, 1, 1, 1};
  check_conv({2, 3, 7, 7}, {6, 1, 3, 3}, 3, d, "NOTSET", {2, 6, 4, 4}, true);  // depth multiplier 2
  check_conv({1, 5, 6, 6}, {5, 1, 3, 3}, 5, p, "NOTSET", {1, 5, 6, 6}, false, 2);
}

TEST(XnnpackPlugin, ConvReluAndConvClipFuse) {
  Window2d p{3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  check_conv({1, 3, 5, 5}, {4, 3, 3, 3}, 1, p, "NOTSET", {1, 4, 5, 5}, true, 1, "Relu");
  check_conv({1, 3, 5, 5}, {4, 3, 3, 3}, 1, p, "NOTSET", {1, 4, 5, 5}, true, 1, "Clip");
  check_conv({1, 4, 5, 5}, {4, 1, 3, 3}, 4, p, "NOTSET", {1, 4, 5, 5}, true, 1, "Clip");
}

TEST(XnnpackPlugin, ConvReluCompositeFromAPattern) {
  // The host hands a matched pattern over as a Composite whose body holds the nodes.
  GraphBuilder body;
  const int bx = body.value("x", {1, 2, 4, 4}), bw = body.value("w", {3, 2, 1, 1}), bc = body.value("c", {1, 3, 4, 4}),
            by = body.value("y", {1, 3, 4, 4});
  body.node("Conv", {bx, bw}, {bc});
  body.node("Relu", {bc}, {by});
  body.inputs({bx, bw});
  body.outputs({by});
  GraphBuilder g;
  HostTensor x = random_tensor({1, 2, 4, 4}, 5), w = random_tensor({3, 2, 1, 1}, 6);
  const int xi = g.value("x", x.dims), wi = g.constant("w", w.dims, w.data), yi = g.value("y", {1, 3, 4, 4});
  g.node("Composite", {xi, wi}, {yi}, 1, "tessera");
  g.attr_string("pattern", "xnnpack_convolution_relu");
  g.attr_graph("body", body.graph());
  g.inputs({xi});
  g.outputs({yi});
  std::string error;
  size_t ops = 0;
  std::vector<HostTensor> y = run_graph(g.graph(), {x}, &error, 1, &ops);
  ASSERT_EQ(error, "");
  EXPECT_EQ(ops, 1u);
  std::vector<float> want = conv_reference(x, w, {}, 1, Window2d{1, 1}, {1, 3, 4, 4});
  for (float& v : want) v = std::max(v, 0.0f);
  expect_near(y[0].data, want);
}

TEST(XnnpackPlugin, GemmAndMatMulAsFullyConnected) {
  {  // Gemm transB=1, alpha, beta·C[N]
    GraphBuilder g;
    HostTensor a = random_tensor({3, 5}, 7), b = random_tensor({4, 5}, 8), c = random_tensor({4}, 9);
    const int ai = g.value("a", a.dims), yi = g.value("y", {3, 4});
    g.node("Gemm", {ai, g.constant("b", b.dims, b.data), g.constant("c", c.dims, c.data)}, {yi});
    g.attr_int("transB", 1);
    g.attr_float("alpha", 0.5f);
    g.attr_float("beta", 2.0f);
    g.inputs({ai});
    g.outputs({yi});
    std::string error;
    std::vector<HostTensor> y = run_graph(g.graph(), {a}, &error);
    ASSERT_EQ(error, "");
    std::vector<float> bias = c.data;
    for (float& v : bias) v *= 2.0f;
    expect_near(y[0].data, gemm_reference(a.data, 3, 5, b.data, true, 4, bias, 0.5f));
  }
  {  // MatMul on a rank-3 A, + bias, → Relu: one fully connected op
    GraphBuilder g;
    HostTensor a = random_tensor({2, 3, 6}, 10), b = random_tensor({6, 4}, 11), c = random_tensor({4}, 12);
    const int ai = g.value("a", a.dims), mi = g.value("m", {2, 3, 4}), si = g.value("s", {2, 3, 4}), yi = g.value("y", {2, 3, 4});
    g.node("MatMul", {ai, g.constant("b", b.dims, b.data)}, {mi});
    g.node("Add", {g.constant("c", c.dims, c.data), mi}, {si});
    g.node("Relu", {si}, {yi});
    g.inputs({ai});
    g.outputs({yi});
    std::string error;
    size_t ops = 0;
    std::vector<HostTensor> y = run_graph(g.graph(), {a}, &error, 1, &ops);
    ASSERT_EQ(error, "");
    EXPECT_EQ(ops, 1u);
    std::vector<float> want = gemm_reference(a.data, 6, 6, b.data, false, 4, c.data);
    for (float& v : want) v = std::max(v, 0.0f);
    expect_near(y[0].data, want);
  }
}

void check_pool(const char* op, std::vector<int64_t> xd, Window2d p, bool ceil_mode, bool count_include_pad,
                std::vector<int64_t> out) {
  GraphBuilder g;
  HostTensor x = random_tensor(xd, 13, -3.0f, -1.0f);  // all negative: a zero from padding would show
  const int xi = g.value("x", xd), yi = g.value("y", out);
  g.node(op, {xi}, {yi});
  g.attr_ints("kernel_shape", {p.kh, p.kw});
  g.attr_ints("strides", {p.sh, p.sw});
  g.attr_ints("pads", {p.pad_top, p.pad_left, p.pad_bottom, p.pad_right});
  if (p.dh != 1 || p.dw != 1) g.attr_ints("dilations", {p.dh, p.dw});
  g.attr_int("ceil_mode", ceil_mode);
  if (!std::strcmp(op, "AveragePool")) g.attr_int("count_include_pad", count_include_pad);
  g.inputs({xi});
  g.outputs({yi});
  const tsrp_graph* graph = g.graph();
  ASSERT_EQ(refusal(graph, 0), "");
  std::string error;
  std::vector<HostTensor> y = run_graph(graph, {x}, &error);
  ASSERT_EQ(error, "");
  // The reference's "counted" region for ceil_mode stops at the explicit pads, like ONNX.
  expect_near(y[0].data, pool_reference(x, p, out, !std::strcmp(op, "MaxPool"), count_include_pad));
}

TEST(XnnpackPlugin, MaxPool) {
  check_pool("MaxPool", {1, 3, 7, 7}, Window2d{3, 3, 2, 2, 1, 1, 1, 1, 1, 1}, false, false, {1, 3, 4, 4});
  check_pool("MaxPool", {2, 2, 6, 6}, Window2d{3, 3, 2, 2, 1, 1, 0, 0, 0, 0}, true, false, {2, 2, 3, 3});  // ceil
  check_pool("MaxPool", {1, 2, 8, 8}, Window2d{2, 2, 1, 1, 2, 2, 0, 0, 0, 0}, false, false, {1, 2, 6, 6});  // dilated
  check_pool("MaxPool", {1, 1, 6, 6}, Window2d{2, 2, 1, 1, 2, 2, 1, 1, 1, 1}, false, false, {1, 1, 6, 6});  // + pads
  check_pool("MaxPool", {1, 2, 7, 7}, Window2d{3, 3, 2, 2, 2, 2, 1, 1, 1, 1}, false, false, {1, 2, 3, 3});
}

TEST(XnnpackPlugin, AveragePool) {
  Window2d p{3, 3, 2, 2, 1, 1, 1, 1, 1, 1};
  check_pool("AveragePool", {1, 3, 7, 7}, p, false, false, {1, 3, 4, 4});
  check_pool("AveragePool", {1, 3, 7, 7}, p, false, true, {1, 3, 4, 4});  // pads counted: a Pad first
  check_pool("AveragePool", {2, 2, 6, 6}, Window2d{3, 3, 2, 2, 1, 1, 0, 0, 0, 0}, true, false, {2, 2, 3, 3});
  check_pool("AveragePool", {1, 4, 6, 6}, Window2d{1, 1}, false, false, {1, 4, 6, 6});  // 1x1: a copy (alexnet)
  check_pool("MaxPool", {1, 4, 2, 3}, Window2d{1, 1}, false, false, {1, 4, 2, 3});
}

TEST(XnnpackPlugin, GlobalAveragePoolFlattenGemm) {
  // The classifier head: GAP [N,C,1,1] → Flatten [N,C] (same bytes in NHWC) → Gemm.
  GraphBuilder g;
  HostTensor x = random_tensor({2, 4, 3, 5}, 14), b = random_tensor({3, 4}, 15);
  const int xi = g.value("x", x.dims), pi = g.value("p", {2, 4, 1, 1}), fi = g.value("f", {2, 4}), yi = g.value("y", {2, 3});
  g.node("GlobalAveragePool", {xi}, {pi});
  g.node("Flatten", {pi}, {fi});
  g.node("Gemm", {fi, g.constant("b", b.dims, b.data)}, {yi});
  g.attr_int("transB", 1);
  g.inputs({xi});
  g.outputs({yi, pi});
  std::string error;
  std::vector<HostTensor> y = run_graph(g.graph(), {x}, &error);
  ASSERT_EQ(error, "");
  std::vector<float> pooled = pool_reference(x, Window2d{3, 5}, {2, 4, 1, 1}, false, false);
  expect_near(y[1].data, pooled);
  expect_near(y[0].data, gemm_reference(pooled, 2, 4, b.data, true, 3, {}));
}

void check_binary(const char* op, std::vector<int64_t> ad, std::vector<int64_t> bd, bool b_constant,
                  std::function<float(float, float)> f) {
  GraphBuilder g;
  HostTensor a = random_tensor(ad, 16), b = random_tensor(bd, 17, 0.5f, 2.0f);
  std::vector<int64_t> out(std::max(ad.size(), bd.size()));
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t ia = i + ad.size() - out.size(), ib = i + bd.size() - out.size();
    out[i] = std::max(i + ad.size() >= out.size() ? ad[ia] : 1, i + bd.size() >= out.size() ? bd[ib] : 1);
  }
  const int ai = g.value("a", ad), bi = b_constant ? g.constant("b", bd, b.data) : g.value("b", bd), yi = g.value("y", out);
  g.node(op, {ai, bi}, {yi});
  g.inputs(b_constant ? std::vector<int>{ai} : std::vector<int>{ai, bi});
  g.outputs({yi});
  std::string error;
  std::vector<HostTensor> y = run_graph(g.graph(), b_constant ? std::vector<HostTensor>{a} : std::vector<HostTensor>{a, b}, &error);
  ASSERT_EQ(error, "") << op;
  expect_near(y[0].data, broadcast_reference(a, b, out, f));
}

TEST(XnnpackPlugin, BinaryBroadcastThroughTheLayoutChange) {
  auto add = [](float x, float y) { return x + y; };
  check_binary("Add", {2, 3, 4, 5}, {3, 1, 1}, true, add);              // per-channel constant
  check_binary("Sub", {2, 3, 4, 5}, {5}, true, [](float x, float y) { return x - y; });  // along W
  check_binary("Mul", {2, 3, 4, 5}, {1, 3, 1, 1}, false, [](float x, float y) { return x * y; });
  check_binary("Div", {2, 3, 4, 5}, {4, 5}, false, [](float x, float y) { return x / y; });  // reshaped in
  check_binary("Max", {2, 3, 4, 5}, {2, 3, 4, 5}, false, [](float x, float y) { return std::max(x, y); });
  check_binary("Min", {3, 1}, {1, 6}, false, [](float x, float y) { return std::min(x, y); });
  check_binary("Add", {2, 1, 4, 1}, {2, 3, 1, 5}, false, add);
}

void check_unary(const char* op, std::function<float(float)> f, std::function<void(GraphBuilder&)> attrs = nullptr,
                 std::vector<int64_t> dims = {2, 3, 4, 5}, float lo = -4.0f, float hi = 4.0f, int opset = 17) {
  GraphBuilder g;
  HostTensor x = random_tensor(dims, 18, lo, hi);
  const int xi = g.value("x", dims), yi = g.value("y", dims);
  g.node(op, {xi}, {yi}, opset);
  if (attrs) attrs(g);
  g.inputs({xi});
  g.outputs({yi});
  std::string error;
  std::vector<HostTensor> y = run_graph(g.graph(), {x}, &error);
  ASSERT_EQ(error, "") << op;
  std::vector<float> want(x.data.size());
  for (size_t i = 0; i < want.size(); ++i) want[i] = f(x.data[i]);
  SCOPED_TRACE(op);
  expect_near(y[0].data, want, 1e-4f);
}

TEST(XnnpackPlugin, ElementWiseActivations) {
  check_unary("Relu", [](float x) { return std::max(x, 0.0f); });
  check_unary("Sigmoid", [](float x) { return 1.0f / (1.0f + std::exp(-x)); });
  check_unary("HardSwish", [](float x) { return x * std::max(0.0f, std::min(1.0f, x / 6.0f + 0.5f)); });
  check_unary("LeakyRelu", [](float x) { return x < 0 ? 0.2f * x : x; }, [](GraphBuilder& g) { g.attr_float("alpha", 0.2f); });
  check_unary("Elu", [](float x) { return x < 0 ? 0.7f * (std::exp(x) - 1.0f) : x; }, [](GraphBuilder& g) { g.attr_float("alpha", 0.7f); });
  check_unary("Abs", [](float x) { return std::fabs(x); });
  check_unary("Neg", [](float x) { return -x; });
  check_unary("Floor", [](float x) { return std::floor(x); });
  check_unary("Ceil", [](float x) { return std::ceil(x); });
  check_unary("Round", [](float x) { return std::nearbyint(x); });
  check_unary("Sqrt", [](float x) { return std::sqrt(x); }, nullptr, {7, 3}, 0.0f, 9.0f);
  check_unary("Clip", [](float x) { return std::min(std::max(x, -1.0f), 2.0f); }, [](GraphBuilder& g) {
    g.attr_float("min", -1.0f);
    g.attr_float("max", 2.0f);
  }, {2, 3, 4, 5}, -4.0f, 4.0f, 6);  // Clip-6: bounds as attributes
}

TEST(XnnpackPlugin, RoundIsHalfToEven) {
  GraphBuilder g;
  HostTensor x{{6}, {0.5f, 1.5f, 2.5f, -0.5f, -2.5f, 3.7f}};
  const int xi = g.value("x", x.dims), yi = g.value("y", x.dims);
  g.node("Round", {xi}, {yi});
  g.inputs({xi});
  g.outputs({yi});
  std::string error;
  std::vector<HostTensor> y = run_graph(g.graph(), {x}, &error);
  ASSERT_EQ(error, "");
  expect_near(y[0].data, {0.0f, 2.0f, 2.0f, -0.0f, -2.0f, 4.0f});
}

TEST(XnnpackPlugin, PReluSoftmaxPad) {
  {
    GraphBuilder g;
    HostTensor x = random_tensor({2, 3, 4, 4}, 19), s = random_tensor({3, 1, 1}, 20);
    const int xi = g.value("x", x.dims), yi = g.value("y", x.dims);
    g.node("PRelu", {xi, g.constant("s", s.dims, s.data)}, {yi});
    g.inputs({xi});
    g.outputs({yi});
    std::string error;
    std::vector<HostTensor> y = run_graph(g.graph(), {x}, &error);
    ASSERT_EQ(error, "");
    expect_near(y[0].data, broadcast_reference(x, s, x.dims, [](float v, float a) { return v < 0 ? a * v : v; }));
  }
  {
    GraphBuilder g;
    HostTensor x = random_tensor({3, 7}, 21, -5.0f, 5.0f);
    const int xi = g.value("x", x.dims), yi = g.value("y", x.dims);
    g.node("Softmax", {xi}, {yi});
    g.inputs({xi});
    g.outputs({yi});
    std::string error;
    std::vector<HostTensor> y = run_graph(g.graph(), {x}, &error);
    ASSERT_EQ(error, "");
    std::vector<float> want(x.data.size());
    for (int r = 0; r < 3; ++r) {
      double sum = 0;
      for (int c = 0; c < 7; ++c) sum += std::exp(double(x.data[r * 7 + c]));
      for (int c = 0; c < 7; ++c) want[r * 7 + c] = float(std::exp(double(x.data[r * 7 + c])) / sum);
    }
    expect_near(y[0].data, want);
  }
  {
    GraphBuilder g;
    HostTensor x = random_tensor({1, 2, 3, 3}, 22);
    const int xi = g.value("x", x.dims), yi = g.value("y", {1, 3, 4, 6});
    g.node("Pad", {xi, g.constant_int64("pads", {8}, {0, 0, 1, 2, 0, 1, 0, 1}), g.constant("v", {}, {1.5f})}, {yi});
    g.inputs({xi});
    g.outputs({yi});
    std::string error;
    std::vector<HostTensor> y = run_graph(g.graph(), {x}, &error);
    ASSERT_EQ(error, "");
    std::vector<float> want(count_of({1, 3, 4, 6}), 1.5f);
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j) want[(c * 4 + i + 1) * 6 + j + 2] = x.data[(c * 3 + i) * 3 + j];
    expect_near(y[0].data, want);
  }
}

TEST(XnnpackPlugin, RefusalsNameWhatIsWrong) {
  GraphBuilder g;
  const int i64 = g.value("x", {2, 3}, TSRP_INT64), f = g.value("f", {1, 3, 4, 5}), dyn = g.value("d", {-1, 3});
  const int o1 = g.value("o1", {2, 3}, TSRP_INT64), o2 = g.value("o2", {1, 3, 4, 5}), o3 = g.value("o3", {1, 3, 4, 5}),
            o4 = g.value("o4", {-1, 3}), o5 = g.value("o5", {1, 60}), o6 = g.value("o6", {1, 3, 4, 5}),
            o7 = g.value("o7", {1, 3, 4, 5}), v3 = g.value("v3", {3, 4, 1});
  g.node("Add", {i64, i64}, {o1});
  g.node("Tanh", {f}, {o2});
  g.node("Softmax", {f}, {o3});
  g.node("Relu", {dyn}, {o4});
  g.node("Flatten", {f}, {o5});
  g.node("Add", {f, v3}, {o6});
  g.node("Conv", {f, g.value("w", {3, 3, 3, 3})}, {o7});
  const tsrp_graph* graph = g.graph();
  EXPECT_NE(refusal(graph, 0).find("input 'x' is int64; only float32"), std::string::npos) << refusal(graph, 0);
  EXPECT_NE(refusal(graph, 1).find("tanh"), std::string::npos) << refusal(graph, 1);
  EXPECT_NE(refusal(graph, 2).find("NHWC"), std::string::npos) << refusal(graph, 2);
  EXPECT_NE(refusal(graph, 3).find("dynamic"), std::string::npos) << refusal(graph, 3);
  EXPECT_NE(refusal(graph, 4).find("reorder"), std::string::npos) << refusal(graph, 4);
  EXPECT_NE(refusal(graph, 5).find("input 'v3'"), std::string::npos) << refusal(graph, 5);
  EXPECT_NE(refusal(graph, 6).find("weight 'w' not a constant"), std::string::npos) << refusal(graph, 6);
  for (size_t i = 0; i < graph->node_count; ++i) EXPECT_EQ(refusal(graph, i).rfind("xnnpack: ", 0), 0u);
}

// A small valid region (Conv → Relu → Add) and its payload, for the hostile-payload tests.
struct SmallRegion {
  SmallRegion() {
    x = random_tensor({1, 2, 5, 5}, 23);
    const int xi = g.value("x", x.dims), ci = g.value("c", {1, 3, 5, 5}), ri = g.value("r", {1, 3, 5, 5}),
              yi = g.value("y", {1, 3, 5, 5});
    g.node("Conv", {xi, g.constant("w", {3, 2, 3, 3}, random_values(54, 24)), g.constant("b", {3}, {0.1f, 0.2f, 0.3f})}, {ci});
    g.attr_ints("pads", {1, 1, 1, 1});
    g.node("Relu", {ci}, {ri});
    g.node("Add", {ri, g.constant("k", {3, 1, 1}, {1.0f, 2.0f, 3.0f})}, {yi});
    g.inputs({xi});
    g.outputs({yi});
    graph = g.graph();
  }
  GraphBuilder g;
  HostTensor x;
  const tsrp_graph* graph;
};

// Loads `bytes`; when it loads, runs it too (must not crash). Returns load's error.
std::string try_payload(tsrp_backend* backend, SmallRegion& r, const std::vector<uint8_t>& bytes) {
  tsrp_region* region = nullptr;
  std::string error = take(plugin()->load(backend, r.graph, bytes.data(), bytes.size(), &region));
  if (error.empty()) {
    HostTensor out{{1, 3, 5, 5}, std::vector<float>(75)};
    DLTensor in = dl(r.x), o = dl(out);
    tsrp_run_args args{};
    args.struct_size = sizeof(args);
    args.input_count = 1;
    args.inputs = &in;
    args.output_count = 1;
    args.outputs = &o;
    take(plugin()->run(region, &args));
    plugin()->release_region(region);
  }
  return error;
}

TEST(XnnpackPlugin, HostilePayloadsGiveAnErrorNeverACrash) {
  SmallRegion r;
  Backend b;
  std::string error;
  const std::vector<uint8_t> good = compile_bytes(b.backend, r.graph, &error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(try_payload(b.backend, r, good), "");
  for (size_t n = 0; n < good.size(); ++n) {  // every truncation
    const std::string e = try_payload(b.backend, r, std::vector<uint8_t>(good.begin(), good.begin() + n));
    EXPECT_EQ(e.rfind("xnnpack payload: ", 0), 0u) << n << ": " << e;
  }
  std::mt19937 gen(25);
  for (int round = 0; round < 300; ++round) {  // random bytes, with and without a valid header
    std::vector<uint8_t> bytes(gen() % 200);
    for (uint8_t& c : bytes) c = static_cast<uint8_t>(gen());
    if (round % 2 && bytes.size() >= 8) std::memcpy(bytes.data(), good.data(), 8);
    EXPECT_NE(try_payload(b.backend, r, bytes), "");
  }
  for (size_t i = 0; i < good.size(); ++i) {  // every byte changed: an error, or a payload that still runs
    for (uint8_t v : {uint8_t(0xff), uint8_t(0x01), uint8_t(0x80)}) {
      std::vector<uint8_t> bytes = good;
      bytes[i] ^= v;
      const std::string e = try_payload(b.backend, r, bytes);
      if (!e.empty()) {
        EXPECT_EQ(e.rfind("xnnpack", 0), 0u) << e;
      }
    }
  }
  std::vector<uint8_t> bad_index = good;  // the first tensor's ref (a region input index) out of range
  const int32_t ref = 7;
  std::memcpy(bad_index.data() + 16 + 4, &ref, 4);
  EXPECT_NE(try_payload(b.backend, r, bad_index).find("index"), std::string::npos);
}

TEST(XnnpackPlugin, RunChecksTensorsAndReportsTime) {
  SmallRegion r;
  Backend b;
  std::string error;
  const std::vector<uint8_t> bytes = compile_bytes(b.backend, r.graph, &error);
  tsrp_region* region = nullptr;
  ASSERT_EQ(take(plugin()->load(b.backend, r.graph, bytes.data(), bytes.size(), &region)), "");
  HostTensor wrong{{1, 2, 5, 4}, std::vector<float>(40)}, out{{1, 3, 5, 5}, {}};
  DLTensor in = dl(wrong), o{};
  o = dl(out);
  o.data = nullptr;  // left to allocate_output
  struct Context {
    HostTensor* out;
    int allocations = 0;
    double ms = 0;
    size_t nodes = 0;
    DLTensor* tensor;
  } context{&out, 0, 0, 0, &o};
  tsrp_run_args args{};
  args.struct_size = sizeof(args);
  args.input_count = 1;
  args.inputs = &in;
  args.output_count = 1;
  args.outputs = &o;
  args.host_context = &context;
  args.allocate_output = [](void* c, size_t, const int64_t* shape, int32_t ndim) -> tsrp_status* {
    Context* ctx = static_cast<Context*>(c);
    ctx->out->data.assign(count_of(std::vector<int64_t>(shape, shape + ndim)), 0.0f);
    ctx->tensor->data = ctx->out->data.data();
    ++ctx->allocations;
    return nullptr;
  };
  args.node_finished = [](void* c, size_t, double ms) {
    static_cast<Context*>(c)->ms += ms;
    ++static_cast<Context*>(c)->nodes;
  };
  tsrp_status* s = plugin()->run(region, &args);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->code, TSRP_INVALID_ARGUMENT);
  EXPECT_NE(take(s).find("shape"), std::string::npos);
  in = dl(r.x);
  ASSERT_EQ(take(plugin()->run(region, &args)), "");
  EXPECT_EQ(context.allocations, 1);
  EXPECT_EQ(context.nodes, 3u);
  std::vector<float> want = conv_reference(r.x, HostTensor{{3, 2, 3, 3}, random_values(54, 24)}, {0.1f, 0.2f, 0.3f}, 1,
                                           Window2d{3, 3, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 3, 5, 5});
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(want[i], 0.0f) + float(1 + i / 25);
  expect_near(out.data, want);
  plugin()->release_region(region);
}

}  // namespace
}  // namespace xnnpack_test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc > 1) xnnpack_test::g_plugin_path = argv[1];
  return RUN_ALL_TESTS();
}
