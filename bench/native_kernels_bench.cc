// The native backend's float32 GEMM, integer GEMM and convolution, in GFLOP/s and as a
// fraction of this machine's measured FMA peak. Google Benchmark; run with
//   build/bench/tessera_native_kernels_bench [--benchmark_filter=Sgemm] [--benchmark_repetitions=5]
//
// Counters:
//   GFLOP/s     2*M*N*K (per image for Conv) over wall-clock time
//   %peak       GFLOP/s over threads x the single-core peak
//   %peak_cpu   FLOP per CPU-second (all threads' CPU time) over the
//               single-core peak: on a machine shared with other work, what the
//               cores reach while they run (for 2 threads the pool's spinning
//               counts as CPU time too)
//   %peak_best  the fastest single iteration's GFLOP/s over threads x the
//               single-core peak (best of repetitions, as the peak itself is)
// The peak is the best ISA's register-only FMA loop (fma_peak.h), measured at
// start on one core by CPU time (so other processes taking turns on the CPU do
// not lower it) unless TESSERA_PEAK_GFLOPS gives it (GFLOP/s of one core, e.g.
// the figure `tessera_peak` prints on a quiet machine).
//
// Sgemm: C = A*B with row-major A (MxK) and B (KxN), packing included (as a
// MatMul with two activations runs); square 256..2048 and ResNet-50 / BERT-base
// shapes (M x N x K): the 3x3 convolutions as im2col products (3136x64x576,
// 784x128x1152, 196x256x2304, 49x512x4608) and BERT's projections and
// feed-forward (128x768x768, 128x3072x768, 128x768x3072).
// SgemmPackedB: the same with B packed once (a MatMul against constant weights)
// and streamed from memory (copies of B past 128 MB, taken in turn), at 32 rows:
// a GPT-2-small decoder's prompt (32 x {2304, 768, 3072, 50257} x {768, 3072}).
// Conv: one Conv node compiled and run by the native backend (constant weights
// packed at compile time; 3x3 and 7x7 read im2col in place from padded phase
// images, 1x1 read X as B), ResNet-50's convolutions.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>

#include "backends/native/kernels/nn_internal.h"
#include "backends/native/kernels/quantization_internal.h"
#include "backends/native/thread_pool.h"
#include "fma_peak.h"
#include "ir/op_schema.h"
#include "runtime/session.h"

namespace tessera {
namespace {

/// GFLOP/s of one core at the FMA peak (see the file comment).
double core_peak_gflops() {
  static const double peak = [] {
    if (const char* given = std::getenv("TESSERA_PEAK_GFLOPS")) {
      const double v = std::atof(given);
      if (v > 0) return v;
    }
    for (const bench::FmaIsa& isa : bench::fma_isas()) {
      if (isa.supported) return bench::measure_fma_peak(isa, 1, 5, 0.1).best_cpu_time_gflops;
    }
    return 0.0;
  }();
  return peak;
}

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Runs `body` once per benchmark iteration and sets the counters for `flop` per iteration.
template <typename Body>
void run_timed(benchmark::State& state, double flop, int threads, Body&& body) {
  body();  // warm-up: first-touch of buffers, thread start
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  double fastest = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    fastest = std::min(fastest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const double wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  const double cpu_seconds = process_cpu_seconds() - cpu0;
  const double total = flop * static_cast<double>(state.iterations());
  const double core_peak = core_peak_gflops() * 1e9;
  // Plain values (not Google Benchmark rates, which it would print with "/s").
  state.counters["GFLOP/s"] = total / wall_seconds * 1e-9;
  state.counters["%peak"] = total / wall_seconds / (core_peak * threads) * 100;
  state.counters["%peak_cpu"] = total / cpu_seconds / core_peak * 100;
  state.counters["%peak_best"] = flop / fastest / (core_peak * threads) * 100;
}

std::vector<float> random_floats(int64_t count, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(count));
  uint32_t s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1 << 23) - 1.0f;
  }
  return v;
}

// ----------------------------------------------------------------- SGEMM --

/// A float32 GEMM's operands from the benchmark's arguments M, N, K and threads: random row-major A and
/// B, C, a pool and this CPU's best microkernel.
struct SgemmCase {
  explicit SgemmCase(const benchmark::State& state)
      : m(state.range(0)), n(state.range(1)), k(state.range(2)), threads(static_cast<int>(state.range(3))),
        a(random_floats(m * k, 1)), b(random_floats(k * n, 2)), c(static_cast<size_t>(m * n)), pool(threads),
        kernel(native::best_gemm_microkernel()) {}
  const int64_t m, n, k;
  const int threads;
  const std::vector<float> a, b;
  std::vector<float> c;
  native::ThreadPool pool;
  const native::GemmMicrokernel& kernel;
};

void BM_Sgemm(benchmark::State& state) {
  SgemmCase g(state);
  state.SetLabel(g.kernel.name);
  run_timed(state, 2.0 * g.m * g.n * g.k, g.threads, [&] {
    native::gemm_f32(g.kernel, g.m, g.n, g.k, native::GemmA{nullptr, {g.a.data(), g.k, 1}},
                     native::GemmB{nullptr, {}, {g.b.data(), g.n, 1}}, g.c.data(), g.n, false, nullptr, &g.pool);
    benchmark::ClobberMemory();
  });
}

void sgemm_shapes(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"M", "N", "K", "threads"});
  for (int threads : {1, 2}) {
    for (int64_t size : {256, 512, 1024, 2048}) bench->Args({size, size, size, threads});
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
             {3136, 64, 576}, {784, 128, 1152}, {196, 256, 2304}, {49, 512, 4608},  // ResNet-50 3x3 convs
             {128, 768, 768}, {128, 3072, 768}, {128, 768, 3072}}) {               // BERT-base, sequence 128
      bench->Args({m, n, k, threads});
    }
  }
}
BENCHMARK(BM_Sgemm)->Apply(sgemm_shapes)->UseRealTime()->Unit(benchmark::kMillisecond);

/// C = A * B with B a constant from memory, few rows: each iteration takes the next of enough copies of B
/// to pass 128 MB, so that B comes from memory as a model's weights do (12 layers' weights do not fit any
/// cache). `packed`: B packed at compile time (a MatMul against weights: BM_SgemmPackedB, a decoder's
/// prompt); else read in place, nothing packed (a region's native fallback, whose weights the region's
/// own backend keeps: BM_SgemmInPlaceB).
void sgemm_b_from_memory(benchmark::State& state, bool packed) {
  SgemmCase g(state);
  const int64_t copies = std::max<int64_t>(1, (int64_t{128} << 20) / (g.k * g.n * 4) + 1);
  std::vector<native::PackedMatrix> packed_copies;
  std::vector<std::vector<float>> plain_copies;
  for (int64_t i = 0; i < copies; ++i) {
    if (packed) {
      packed_copies.push_back(native::pack_gemm_b(g.kernel, {g.b.data(), g.n, 1}, g.k, g.n));
    } else {
      plain_copies.push_back(g.b);
    }
  }
  state.SetLabel(std::string(g.kernel.name) + ", " + std::to_string(copies) + " copies of B");
  int64_t next = 0;
  run_timed(state, 2.0 * g.m * g.n * g.k, g.threads, [&] {
    const size_t i = static_cast<size_t>(next);
    const native::GemmB b = packed ? native::GemmB{&packed_copies[i], {}, {}}
                                   : native::GemmB{nullptr, {}, {plain_copies[i].data(), g.n, 1}};
    native::gemm_f32(g.kernel, g.m, g.n, g.k, native::GemmA{nullptr, {g.a.data(), g.k, 1}}, b, g.c.data(), g.n, false,
                     nullptr, &g.pool);
    next = (next + 1) % copies;
    benchmark::ClobberMemory();
  });
}
void BM_SgemmPackedB(benchmark::State& state) { sgemm_b_from_memory(state, true); }
void BM_SgemmInPlaceB(benchmark::State& state) { sgemm_b_from_memory(state, false); }

void packed_b_shapes(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"M", "N", "K", "threads"});
  for (int threads : {1, 2}) {
    // A GPT-2-small decoder's 32-token prompt: attention in/out, feed-forward up/down, the vocabulary head.
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
             {32, 2304, 768}, {32, 768, 768}, {32, 3072, 768}, {32, 768, 3072}, {32, 50257, 768}}) {
      bench->Args({m, n, k, threads});
    }
  }
}
BENCHMARK(BM_SgemmPackedB)->Apply(packed_b_shapes)->UseRealTime()->Unit(benchmark::kMillisecond);

/// One row (a decoder's token) against GPT-2-small's matrices, and three rows, packed and in place.
void row_shapes(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"M", "N", "K", "threads"});
  for (int threads : {1, 2}) {
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
             {1, 2304, 768}, {1, 768, 768}, {1, 3072, 768}, {1, 768, 3072}, {1, 50257, 768}, {3, 3072, 768}}) {
      bench->Args({m, n, k, threads});
    }
  }
}
BENCHMARK(BM_SgemmPackedB)->Apply(row_shapes)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SgemmInPlaceB)->Apply(row_shapes)->UseRealTime()->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------- integer GEMM --
// MatMulInteger's product, A [M x K] uint8 less its zero point times a packed
// int8 B [K x N] (the weight, packed once): the u8 x s8 vpdpbusd GEMM where
// the CPU has AVX512_VNNI, else the int16 pmaddwd GEMM (A widened per call).
// GOP/s is 2*M*N*K integer operations; %vnni_peak is against the vpdpbusd
// loop's peak (fma_peak.h; 0 on CPUs without it). The shapes are the
// quantize_dynamic MLP's and BERT-base's products at sequence 128.

double core_vnni_peak_gops() {
  static const double peak = [] {
    for (const bench::FmaIsa& isa : bench::fma_isas()) {
      if (isa.supported && std::string(isa.name) == "avx512_vnni") {
        return bench::measure_fma_peak(isa, 1, 5, 0.1).best_cpu_time_gflops;
      }
    }
    return 0.0;
  }();
  return peak;
}

void BM_IntegerGemm(benchmark::State& state) {
  const int64_t m = state.range(0), n = state.range(1), k = state.range(2);
  const int threads = static_cast<int>(state.range(3));
  Tensor a(DType::kUInt8, {m, k}), b(DType::kInt8, {k, n});
  uint32_t seed = 5;
  for (int64_t i = 0; i < a.numel(); ++i) a.as<uint8_t>()[i] = static_cast<uint8_t>((seed = seed * 1664525u + 1013904223u) >> 24);
  for (int64_t i = 0; i < b.numel(); ++i) b.as<int8_t>()[i] = static_cast<int8_t>((seed = seed * 1664525u + 1013904223u) >> 24);
  Tensor za(DType::kUInt8, {});
  za.as<uint8_t>()[0] = 128;
  const TensorView za_view = za.view();
  std::vector<int32_t> c(static_cast<size_t>(m * n));
  native::ThreadPool pool(threads);
  if (native::quad_gemm_available()) {
    state.SetLabel("u8s8 vpdpbusd");
    native::QuadPackedB packed;
    native::pack_quad_b(b.view(), nullptr, k, n, 0, packed);
    native::QuadA quad;
    run_timed(state, 2.0 * m * n * k, threads, [&] {
      native::quad_a(a.view(), m, k, 0, &za_view, nullptr, quad);
      native::quad_gemm_packed(m, quad, packed, c.data(), n, pool);
      benchmark::ClobberMemory();
    });
  } else {
    state.SetLabel("int16 pmaddwd");
    std::vector<int16_t> b16(static_cast<size_t>(k * n)), a16(static_cast<size_t>(m * k));
    native::subtract_zero_point(b.view(), nullptr, 1, b16.data());
    std::vector<int16_t> packed(static_cast<size_t>(native::packed_integer_b_size(k, n)));
    native::pack_integer_b(k, n, b16.data(), n, packed.data());
    run_timed(state, 2.0 * m * n * k, threads, [&] {
      native::subtract_zero_point(a.view(), &za_view, k, a16.data());
      native::integer_gemm_packed(m, n, k, a16.data(), k, packed.data(), c.data(), n, pool);
      benchmark::ClobberMemory();
    });
  }
  state.counters["GOP/s"] = state.counters["GFLOP/s"];
  state.counters.erase("GFLOP/s");
  for (const char* fp32 : {"%peak", "%peak_cpu", "%peak_best"}) state.counters.erase(fp32);
  const double vnni = core_vnni_peak_gops();
  state.counters["%vnni_peak"] = vnni > 0 ? state.counters["GOP/s"] / (vnni * threads) * 100 : 0;
}

void integer_gemm_shapes(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"M", "N", "K", "threads"});
  for (int threads : {1, 2}) {
    for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{{128, 3072, 768}, {128, 768, 3072}, {128, 768, 768}}) {
      bench->Args({m, n, k, threads});
    }
  }
}
BENCHMARK(BM_IntegerGemm)->Apply(integer_gemm_shapes)->UseRealTime()->Unit(benchmark::kMillisecond);

// ------------------------------------------------------------------ Conv --

/// A model of one Conv node (constant weights and bias) on an NCHW input of batch 1.
std::unique_ptr<CompiledModel> conv_model(int64_t in_channels, int64_t size, int64_t out_channels, int64_t kernel,
                                          int64_t stride, int threads) {
  const int64_t pad = kernel / 2;
  Graph graph;
  const ValueId x = graph.add_value("x", TensorType::make(DType::kFloat32, {1, in_channels, size, size}));
  graph.inputs = {x};
  Tensor w(DType::kFloat32, {out_channels, in_channels, kernel, kernel});
  const std::vector<float> wv = random_floats(w.numel(), 3);
  std::copy(wv.begin(), wv.end(), w.as<float>());
  Tensor bias(DType::kFloat32, {out_channels});
  Node node;
  node.name = "conv";
  node.op_type = "Conv";
  node.opset = 17;
  node.inputs = {x, graph.add_constant("w", std::move(w)), graph.add_constant("b", std::move(bias))};
  node.attrs.set("kernel_shape", Attribute::of_ints({kernel, kernel}));
  node.attrs.set("strides", Attribute::of_ints({stride, stride}));
  node.attrs.set("pads", Attribute::of_ints({pad, pad, pad, pad}));
  const ValueId y = graph.add_value("y");
  node.outputs = {y};
  graph.outputs = {y};
  if (const OpSchema* schema = OpRegistry::instance().find("", "Conv")) {
    for (const AttributeSpec& spec : schema->attributes) {
      if (!node.attrs.has(spec.name) && spec.default_value) node.attrs.set(spec.name, *spec.default_value);
    }
    if (schema->normalize) schema->normalize(graph, node);
  }
  graph.nodes.push_back(std::move(node));
  CompileOptions options;
  options.backends = {"native"};
  options.strict = true;
  options.num_threads = threads;
  return CompiledModel::compile(std::move(graph), options);
}

void BM_Conv(benchmark::State& state) {
  const int64_t in_channels = state.range(0), size = state.range(1), out_channels = state.range(2);
  const int64_t kernel = state.range(3), stride = state.range(4);
  const int threads = static_cast<int>(state.range(5));
  auto model = conv_model(in_channels, size, out_channels, kernel, stride, threads);
  Tensor x(DType::kFloat32, {1, in_channels, size, size});
  const std::vector<float> xv = random_floats(x.numel(), 4);
  std::copy(xv.begin(), xv.end(), x.as<float>());
  const int64_t pad = kernel / 2, out = (size + 2 * pad - kernel) / stride + 1;
  const double flop = 2.0 * out_channels * out * out * in_channels * kernel * kernel;
  state.SetLabel(native::best_gemm_microkernel().name);
  run_timed(state, flop, threads, [&] { benchmark::DoNotOptimize(model->run({x.view()})); });
}

void conv_shapes(benchmark::internal::Benchmark* bench) {
  bench->ArgNames({"Cin", "HW", "Cout", "k", "stride", "threads"});
  for (int threads : {1, 2}) {
    for (const auto& shape : std::vector<std::array<int64_t, 5>>{
             {3, 224, 64, 7, 2},                                                     // stem
             {64, 56, 64, 3, 1}, {128, 56, 128, 3, 2}, {128, 28, 128, 3, 1},        // 3x3, stages 1-2
             {256, 14, 256, 3, 1}, {512, 7, 512, 3, 1},                             // 3x3, stages 3-4
             {64, 56, 256, 1, 1}, {256, 56, 64, 1, 1}, {1024, 14, 256, 1, 1},       // 1x1
             {1024, 14, 2048, 1, 2}}) {                                              // 1x1 stride 2 (downsample)
      bench->Args({shape[0], shape[1], shape[2], shape[3], shape[4], threads});
    }
  }
}
BENCHMARK(BM_Conv)->Apply(conv_shapes)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("core_peak_gflops", std::to_string(tessera::core_peak_gflops()));
  benchmark::AddCustomContext("gemm_microkernel", tessera::native::best_gemm_microkernel().name);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
