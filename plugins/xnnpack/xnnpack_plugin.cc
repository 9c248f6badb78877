// The XNNPACK backend as a Tessera plug-in: the one exported entry point, the
// tsrp_plugin table and its fused patterns (include/tessera/backend_plugin.h).
//
// Contract: includes only the plug-in ABI, DLPack, XNNPACK, pthreadpool and the
// standard library. Every ABI function catches everything: no exception
// crosses into the host, errors are host statuses whose message starts with
// "xnnpack" ("xnnpack payload: ..." for a bad payload). XNNPACK is initialised
// once per process and never deinitialised (xnn_deinitialize would tear down
// cpuinfo for everyone in the process, torch included). Each backend owns one
// pthreadpool of options->num_threads threads (none for 1), shared by its
// regions; runs of one region are serial (serial_runs = 1, and a mutex).
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include <tessera/backend_plugin.h>

#include "xnnpack_lowering.h"
#include "xnnpack_region.h"

#ifndef TESSERA_XNNPACK_SNAPSHOT
#define TESSERA_XNNPACK_SNAPSHOT "unknown"
#endif
#if defined(__x86_64__)
#define TESSERA_XNNPACK_ARCH "x86_64"
#elif defined(__aarch64__)
#define TESSERA_XNNPACK_ARCH "aarch64"
#else
#define TESSERA_XNNPACK_ARCH "other"
#endif

struct tsrp_backend {
  std::shared_ptr<pthreadpool> pool;
};

struct tsrp_region {
  tessera_xnnpack::Region region;
};

namespace {

using namespace tessera_xnnpack;

const tsrp_host* g_host = nullptr;
// The payload depends on the payload format and on what this XNNPACK snapshot accepts; the
// kernels it picks at run time (SSE2 up to AVX-512 through cpuinfo) do not change it.
const char kCompatibility[] = "xnnpack-" TESSERA_XNNPACK_SNAPSHOT "/" TESSERA_XNNPACK_ARCH "/payload-1";

tsrp_status* make_status(tsrp_status_code code, const std::string& message) {
  return g_host->make_status(code, message.c_str());
}

template <typename F>
tsrp_status* guarded(const char* what, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return make_status(TSRP_INTERNAL, std::string("xnnpack: out of memory in ") + what);
  } catch (const std::exception& e) {
    return make_status(TSRP_INTERNAL, std::string("xnnpack: internal error in ") + what + ": " + e.what());
  } catch (...) {
    return make_status(TSRP_INTERNAL, std::string("xnnpack: internal error in ") + what);
  }
}

xnn_status initialize_xnnpack() {
  static std::once_flag once;
  static xnn_status status = xnn_status_uninitialized;
  std::call_once(once, [] { status = xnn_initialize(nullptr); });
  return status;
}

tsrp_status* create_backend(const tsrp_backend_options* options, tsrp_backend** out_backend) {
  return guarded("create_backend", [&]() -> tsrp_status* {
    if (!out_backend) return make_status(TSRP_INVALID_ARGUMENT, "xnnpack: create_backend without out_backend");
    if (initialize_xnnpack() != xnn_status_success) {
      return make_status(TSRP_UNSUPPORTED, "xnnpack: xnn_initialize failed (this CPU lacks what XNNPACK needs)");
    }
    int32_t threads = 1;
    if (options && TSRP_HAS_MEMBER(options, tsrp_backend_options, num_threads) && options->num_threads > 1) {
      threads = options->num_threads;
    }
    auto backend = std::make_unique<tsrp_backend>();
    if (threads > 1) {
      pthreadpool_t pool = pthreadpool_create(static_cast<size_t>(threads));
      if (!pool) return make_status(TSRP_INTERNAL, "xnnpack: pthreadpool_create failed");
      backend->pool = std::shared_ptr<pthreadpool>(pool, pthreadpool_destroy);
    }
    *out_backend = backend.release();
    return nullptr;
  });
}

void destroy_backend(tsrp_backend* backend) { delete backend; }

const char* compatibility(tsrp_backend*) { return kCompatibility; }

const tsrp_memory_space* memory_space(tsrp_backend*) { return nullptr; }

tsrp_status* support(tsrp_backend*, const tsrp_graph* graph, size_t node_index, tsrp_support* out) {
  return guarded("support", [&]() -> tsrp_status* {
    if (!graph || !out) return make_status(TSRP_INVALID_ARGUMENT, "xnnpack: support without a graph or an answer");
    std::string reason;
    out->supported = check_node(graph, node_index, &reason) ? 1 : 0;
    if (!out->supported && TSRP_HAS_MEMBER(out, tsrp_support, reason_capacity) && out->reason && out->reason_capacity) {
      const size_t n = std::min(reason.size(), out->reason_capacity - 1);
      std::memcpy(out->reason, reason.data(), n);
      out->reason[n] = '\0';
    }
    return nullptr;
  });
}

// ------------------------------------------------------------------ patterns
// Each pattern's op entries carry TSRP_PATTERN_SUPPORTED, so the host asks support() of every
// matched node; the fusion itself happens in lowering (clamps into output_min/output_max, a
// constant Add into the fully connected's bias).

constexpr uint32_t kSupported = TSRP_PATTERN_SUPPORTED;
constexpr int32_t kUnchecked = -1;

tsrp_pattern_node op_entry(const char* types, int32_t count, const int32_t* inputs) {
  return tsrp_pattern_node{sizeof(tsrp_pattern_node), TSRP_PATTERN_OP, types, count, inputs, kSupported, 0.0, 0.0};
}
tsrp_pattern_node leaf(tsrp_pattern_kind kind) {
  return tsrp_pattern_node{sizeof(tsrp_pattern_node), kind, nullptr, 0, nullptr, 0, 0.0, 0.0};
}

const int32_t kInput0[] = {0};
const int32_t kInput4[] = {4};
const int32_t kClipInputs[] = {0, 1, 2};   // producer, min, max
const int32_t kMatMulInputs[] = {0, 1};    // any, constant
const int32_t kAddBias[] = {2, 3};         // matmul, constant

// Conv → Clip(min, max constants)
const tsrp_pattern_node kConvClipNodes[] = {op_entry("Conv", kUnchecked, nullptr), leaf(TSRP_PATTERN_CONSTANT),
                                            leaf(TSRP_PATTERN_CONSTANT), op_entry("Clip", 3, kClipInputs)};
// Conv → Relu | Clip with attribute bounds (opset < 11); Gemm → Relu; Add|Sub|Mul|Div → Relu
const tsrp_pattern_node kConvReluNodes[] = {op_entry("Conv", kUnchecked, nullptr), op_entry("Relu|Clip", 1, kInput0)};
const tsrp_pattern_node kGemmReluNodes[] = {op_entry("Gemm", kUnchecked, nullptr), op_entry("Relu", 1, kInput0)};
const tsrp_pattern_node kBinaryReluNodes[] = {op_entry("Add|Sub|Mul|Div", kUnchecked, nullptr), op_entry("Relu", 1, kInput0)};
// MatMul(x, W) + b [→ Relu]
const tsrp_pattern_node kMatMulBiasReluNodes[] = {leaf(TSRP_PATTERN_ANY), leaf(TSRP_PATTERN_CONSTANT),
                                                  op_entry("MatMul", 2, kMatMulInputs), leaf(TSRP_PATTERN_CONSTANT),
                                                  op_entry("Add", 2, kAddBias), op_entry("Relu", 1, kInput4)};

template <size_t N>
struct PatternStorage {
  const tsrp_pattern_node* pointers[N];
  tsrp_pattern pattern;
  PatternStorage(const char* name, const tsrp_pattern_node (&nodes)[N], size_t count, int32_t root) {
    for (size_t i = 0; i < N; ++i) pointers[i] = &nodes[i];
    pattern = tsrp_pattern{sizeof(tsrp_pattern), name, count, pointers, root};
  }
};

const PatternStorage<6> kMatMulBiasRelu("xnnpack_fully_connected_bias_relu", kMatMulBiasReluNodes, 6, 5);
const PatternStorage<6> kMatMulBias("xnnpack_fully_connected_bias", kMatMulBiasReluNodes, 5, 4);
const PatternStorage<4> kConvClip("xnnpack_convolution_clip", kConvClipNodes, 4, 3);
const PatternStorage<2> kConvRelu("xnnpack_convolution_relu", kConvReluNodes, 2, 1);
const PatternStorage<2> kGemmRelu("xnnpack_fully_connected_relu", kGemmReluNodes, 2, 1);
const PatternStorage<2> kBinaryRelu("xnnpack_binary_relu", kBinaryReluNodes, 2, 1);
const tsrp_pattern* const kPatterns[] = {&kMatMulBiasRelu.pattern, &kMatMulBias.pattern, &kConvClip.pattern,
                                         &kConvRelu.pattern, &kGemmRelu.pattern, &kBinaryRelu.pattern};

size_t pattern_count(tsrp_backend*) { return sizeof(kPatterns) / sizeof(kPatterns[0]); }
const tsrp_pattern* pattern(tsrp_backend*, size_t index) {
  return index < pattern_count(nullptr) ? kPatterns[index] : nullptr;
}

// ------------------------------------------------------------------ compile / load / run

tsrp_status* compile(tsrp_backend*, const tsrp_graph* region, tsrp_payload* out_payload) {
  return guarded("compile", [&]() -> tsrp_status* {
    if (!region || !out_payload) return make_status(TSRP_INVALID_ARGUMENT, "xnnpack: compile without a region or payload");
    Program program;
    std::string reason;
    if (!lower_region(region, &program, &reason)) return make_status(TSRP_UNSUPPORTED, reason);
    // The program must pass the checks load() makes, or the artifact would be unloadable.
    ResolvedProgram resolved;
    if (!resolve_program(region, program, &resolved, &reason)) {
      return make_status(TSRP_INTERNAL, "xnnpack: compiled program fails its own check: " + reason);
    }
    auto bytes = std::make_unique<std::vector<uint8_t>>(serialize_program(program));
    out_payload->data = bytes->data();
    out_payload->size = bytes->size();
    out_payload->owner = bytes.release();
    return nullptr;
  });
}

void free_payload(tsrp_backend*, void* owner) { delete static_cast<std::vector<uint8_t>*>(owner); }

tsrp_status* load(tsrp_backend* backend, const tsrp_graph* region, const void* payload, size_t payload_size,
                  tsrp_region** out_region) {
  return guarded("load", [&]() -> tsrp_status* {
    if (!backend || !region || !out_region) return make_status(TSRP_INVALID_ARGUMENT, "xnnpack: load without a region");
    Program program;
    std::string error;
    if (!parse_program(payload, payload_size, &program, &error)) {
      return make_status(TSRP_INVALID_ARGUMENT, "xnnpack payload: " + error);
    }
    auto result = std::make_unique<tsrp_region>();
    if (!build_region(region, program, backend->pool, &result->region, &error)) {
      const bool xnn_failure = error.rfind("xnn_", 0) == 0;
      return make_status(xnn_failure ? TSRP_INTERNAL : TSRP_INVALID_ARGUMENT,
                         (xnn_failure ? "xnnpack: " : "xnnpack payload: ") + error);
    }
    *out_region = result.release();
    return nullptr;
  });
}

void release_region(tsrp_region* region) { delete region; }

tsrp_status* run(tsrp_region* region, const tsrp_run_args* args) {
  return guarded("run", [&]() -> tsrp_status* {
    if (!region) return make_status(TSRP_INVALID_ARGUMENT, "xnnpack: run without a region");
    std::string error;
    tsrp_status* host_status = nullptr;
    const tsrp_status_code code = run_region(&region->region, args, &error, &host_status);
    if (host_status) return host_status;
    return code == TSRP_OK ? nullptr : make_status(code, "xnnpack: " + error);
  });
}

// XNNPACK's clamps (Relu, Clip and every fused output_min/max) and its max/min
// do not keep NaN as numpy does: say so for every region, and the host runs a
// region on its native backend whenever an input holds NaN or +-Inf.
int32_t finite_inputs_only(tsrp_region*) { return 1; }

const tsrp_plugin kPlugin = {
    sizeof(tsrp_plugin),
    TSRP_ABI_MAJOR,
    TSRP_ABI_MINOR,
    "xnnpack",
    "1",
    "XNNPACK " TESSERA_XNNPACK_SNAPSHOT " (Debian's snapshot): float32 convolutions, fully connected, pooling, "
    "element-wise ops; one NHWC subgraph per region",
    create_backend,
    destroy_backend,
    compatibility,
    memory_space,
    support,
    pattern_count,
    pattern,
    compile,
    free_payload,
    load,
    release_region,
    run,
    1,  // serial_runs: an XNNPACK runtime is not re-entrant
    nullptr,  // pattern_check: every entry is checked with support() (TSRP_PATTERN_SUPPORTED)
    finite_inputs_only,
};

}  // namespace

extern "C" TSRP_EXPORT const tsrp_plugin* tessera_backend_plugin(const tsrp_host* host) {
  if (!host || host->abi_major != TSRP_ABI_MAJOR || !TSRP_HAS_MEMBER(host, tsrp_host, make_status) ||
      !host->make_status) {
    return nullptr;
  }
  g_host = host;
  return &kPlugin;
}
