// The oneDNN backend class: compile = lower → serialize → load, so the load
// path (what an artifact uses) is the one that always runs.
#include "backends/dnnl/dnnl_backend.h"

#include <omp.h>

#include <cstdlib>
#include <mutex>

#include "backends/dnnl/dnnl_declarations.h"
#include "backends/dnnl/dnnl_internal.h"
#include "backends/dnnl/dnnl_open_region.h"
#include "backends/dnnl/dnnl_region.h"
#include "ir/error.h"
#include "ir/specialize_shapes.h"

namespace tessera {
namespace {

using dnnl_backend::DnnlRegion;

/// Entries of oneDNN's process-wide primitive cache: none. Regions hold their own primitives, so the
/// cache only saved re-creating one that a region compiled earlier in the process also had (a
/// recompile, tune, check, a new shape's convolutions that another shape or layer also has), and
/// oneDNN 2.6's cache corrupts the heap when it evicts entries: with 128 entries, a second
/// DenseNet-121 session in one process (or one compile whose region is compiled again after a node
/// was refused) crashed in dnnl_primitive_create or in malloc ("malloc_consolidate(): invalid chunk
/// size"), at AVX-512 (Zen 4; not with oneDNN capped at AVX2); TensorFlow turned the cache off for
/// oneDNN 2.6 for the same kind of corruption, and on again from 2.7.1. Without it (Zen 4): no crash;
/// the convolution shape-churn traces within noise (recogniser 1057-1429 ms with it, 1067-1212
/// without; detector 2747-3293 and 2693-3340); a compile up to 0.1 s longer (MobileNetV3-Large 117-146
/// -> 169-181 ms, Inception-v3 1.24-1.36 -> 1.42-1.46 s at one thread), each layer JITting its own
/// kernels; Tessera now shares equal primitives itself, in a map of its own that only drops handles
/// (dnnl_primitive_share.cc). It also bounds memory: with the default of 1024 entries, a session fed thousands of
/// distinct shapes grew by about 40 KB per shape. The user's
/// ONEDNN_PRIMITIVE_CACHE_CAPACITY (or DNNL_...) wins.
constexpr int kPrimitiveCacheCapacity = 0;

void bound_primitive_cache() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") || std::getenv("DNNL_PRIMITIVE_CACHE_CAPACITY")) return;
    dnnl::set_primitive_cache_capacity(kPrimitiveCacheCapacity);
  });
}

/// One CPU engine for every instance of the backend: a primitive runs only on a stream of the engine it
/// was created on, and regions share equal primitives (dnnl_primitive_share.cc) whichever session made
/// them. Never destroyed, as regions may outlive other statics.
const dnnl::engine& process_engine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

class DnnlBackend : public Backend {
 public:
  DnnlBackend() : engine_(process_engine()) {
    bound_primitive_cache();
    dnnl_backend::release_openmp_team_at_fork();
  }
  std::string name() const override { return "dnnl"; }
  std::string version() const override { return "3"; }  // 2: slots carry a data type (bf16); 3: int8 (scales, zero points)
  /// Layouts are chosen for one oneDNN version and instruction set.
  std::string compatibility() const override {
    const dnnl_version_t* v = dnnl_version();
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch) + " " +
           dnnl_backend::effective_isa_name();
  }
  const Declarations& declarations() const override { return dnnl_backend::dnnl_declarations(); }
  std::string bf16_refusal() const override {
    if (dnnl_backend::cpu_has_native_bf16()) return "";
    return "this CPU runs oneDNN at " + dnnl_backend::effective_isa_name() +
           ", without AVX512_BF16 (emulated bf16 would be slower than float32)";
  }

  CompiledRegion compile(const Graph& region, const RegionOptions& options) const override {
    CompiledRegion result;
    if (!all_shapes_static(region)) {
      // Open dims (a model compiled with symbolic dims): lowered per input shape at run time.
      result.payload = dnnl_backend::open_region_payload();
      try {
        result.executable = std::make_unique<dnnl_backend::OpenDnnlRegion>(region, engine_, options.num_threads,
                                                                            options.probe_input_dims);
      } catch (const dnnl::error& e) {
        throw_unsupported("oneDNN backend: ", e.what());
      }
      return result;
    }
    omp_set_num_threads(options.num_threads);  // layouts are chosen for the thread count runs use
    try {
      result.payload = dnnl_backend::serialize_program(dnnl_backend::lower_region(
          region, engine_, bf16_refusal().empty() ? options.bf16_nodes : std::vector<char>{}));
    } catch (const dnnl::error& e) {
      throw_unsupported("oneDNN backend: ", e.what());
    }
    result.executable = load(region, result.payload, options);
    return result;
  }

  std::unique_ptr<ExecutableRegion> load(const Graph& region, std::span<const uint8_t> payload,
                                         const RegionOptions& options) const override {
    if (dnnl_backend::is_open_region_payload(payload)) {
      return std::make_unique<dnnl_backend::OpenDnnlRegion>(region, engine_, options.num_threads,
                                                              std::vector<Shape>{});
    }
    dnnl_backend::Program program = dnnl_backend::parse_program(payload);
    try {
      return std::make_unique<DnnlRegion>(region, std::move(program), engine_, options.num_threads, nullptr,
                                          /*measure_step_threads=*/true);
    } catch (const dnnl::error& e) {
      throw_user_error("oneDNN payload: ", e.what());
    }
  }

 private:
  dnnl::engine engine_;
};

}  // namespace

std::unique_ptr<Backend> make_dnnl_backend() { return std::make_unique<DnnlBackend>(); }

}  // namespace tessera
