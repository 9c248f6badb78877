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

/// Entries of oneDNN's process-wide primitive cache (default 1024). Regions
/// hold their own primitives, so the cache only saves re-creating one that a
/// region compiled earlier in the process also has (a recompile, tune, check);
/// every entry keeps its JIT code alive. With the default, a session fed
/// thousands of distinct shapes grew by about 40 KB per shape until 1024
/// primitives were held (a 3x3 convolution with relu, 1,600 shapes: 45 ->
/// 141 MB in 7.9 s), whatever the session's max_variants; at 128: 45 -> 70 MB
/// in 2.3 s, flat after the first few hundred shapes. The user's
/// ONEDNN_PRIMITIVE_CACHE_CAPACITY (or DNNL_...) wins.
constexpr int kPrimitiveCacheCapacity = 128;

void bound_primitive_cache() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (std::getenv("ONEDNN_PRIMITIVE_CACHE_CAPACITY") || std::getenv("DNNL_PRIMITIVE_CACHE_CAPACITY")) return;
    dnnl::set_primitive_cache_capacity(kPrimitiveCacheCapacity);
  });
}

class DnnlBackend : public Backend {
 public:
  DnnlBackend() : engine_(dnnl::engine::kind::cpu, 0) {
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
