// Backend tuning chosen by measurement: for a 3x3 convolution oneDNN can run
// directly or with Winograd's algorithm (fewer multiplications, other
// layouts). Both are timed on this machine, with the thread count the runs
// use, including the reorders each one's layouts would add at its input and
// output, and the faster wins. The choice is stored in the payload (and the
// compatibility string pins the machine's instruction set).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "backends/dnnl/dnnl_lowering.h"
#include "backends/dnnl/dnnl_op_tables.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {
namespace {

/// Median milliseconds of `run` over a few calls, after a warm-up call.
template <typename F>
double median_milliseconds(F run, dnnl::stream& stream) {
  run();
  stream.wait();
  std::vector<double> times;
  for (int i = 0; i < 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    stream.wait();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

/// The time of a reorder between two layouts (0 when they are equal).
double reorder_milliseconds(const memory::desc& from, const memory::desc& to, const dnnl::engine& engine,
                            dnnl::stream& stream) {
  if (from == to) return 0;
  memory src(from, engine), dst(to, engine);
  dnnl::reorder reorder(src, dst);
  return median_milliseconds([&] { reorder.execute(stream, src, dst); }, stream);
}

}  // namespace

int32_t choose_convolution_algorithm(const Lowering& lowering, Step step, const std::vector<memory::desc>& requests,
                                     const memory::desc& output_request, double* milliseconds) {
  if (milliseconds) *milliseconds = 0;
  const int32_t direct = static_cast<int32_t>(dnnl::algorithm::convolution_direct);
  // TESSERA_DNNL_TUNE=0 turns measurement off (direct always), for
  // reproducible layouts in tests and comparisons.
  if (const char* tune = std::getenv("TESSERA_DNNL_TUNE"); tune && std::string(tune) == "0") return direct;
  // Winograd in oneDNN: 2-D, 3x3, stride 1, no dilation, no groups.
  if (step.kind != StepKind::kConvolution) return direct;
  const memory::desc& weights = lowering.desc(step.inputs[1]);
  const memory::dims w = weights.dims();
  if (w.size() != 4 || w[2] != 3 || w[3] != 3) return direct;
  for (size_t i = 0; i < 2; ++i) {
    if (step.ints[i] != 1 || step.ints[2 + i] != 0) return direct;
  }
  const dnnl::engine& engine = lowering.engine();
  dnnl::stream stream(engine);
  const memory::desc source_layout = lowering.desc(step.inputs[0]);
  double best_ms = 0;
  int32_t best = direct;
  for (const ConvolutionAlgorithm& candidate : convolution_algorithms()) {
    const int32_t algorithm = static_cast<int32_t>(candidate.algorithm);
    step.algorithm = algorithm;
    std::vector<memory::desc> roles = requests;
    for (size_t i = 0; i < roles.size(); ++i) {
      if (roles[i] == memory::desc()) roles[i] = lowering.desc(step.inputs[i]);
    }
    roles.push_back(output_request);
    try {
      dnnl::primitive_desc_base pd = make_primitive_desc(step, roles, lowering.slot_descs(), engine);
      // Time it on scratch memory of the chosen layouts.
      std::unordered_map<int, memory> args;
      const std::vector<int> role_args_list = role_args(step);
      for (size_t i = 0; i < role_args_list.size(); ++i) args[role_args_list[i]] = memory(role_desc(step, pd, i), engine);
      args[DNNL_ARG_SCRATCHPAD] = memory(pd.scratchpad_desc(), engine);
      for (size_t p = 0; p < step.post_ops.size(); ++p) {
        if (step.post_ops[p].kind == PostOpKind::kBinary) {
          args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(p)) | DNNL_ARG_SRC_1] =
              memory(lowering.desc(step.post_ops[p].slot), engine);
        }
      }
      dnnl::primitive primitive(pd.get());
      double ms = median_milliseconds([&] { primitive.execute(stream, args); }, stream);
      // The layouts around it: its source comes from the current layout, its
      // output goes on in the layout its neighbours use (the source's).
      ms += reorder_milliseconds(source_layout, role_desc(step, pd, 0), engine, stream);
      ms += reorder_milliseconds(role_desc(step, pd, step.inputs.size()), source_layout, engine, stream);
      if (std::getenv("TESSERA_DNNL_TUNING_LOG")) {
        std::fprintf(stderr, "dnnl tuning: node %d %s %s: %.3f ms (with reorders)\n", step.node,
                     candidate.name, pd.impl_info_str(), ms);
      }
      if (best_ms == 0 || ms < best_ms) {
        best_ms = ms;
        best = algorithm;
      }
    } catch (const dnnl::error&) {
      // This algorithm has no implementation for these shapes (or data types): keep the other.
    }
  }
  if (milliseconds) *milliseconds = best_ms;
  return best;
}

}  // namespace tessera::dnnl_backend
