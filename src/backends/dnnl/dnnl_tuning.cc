// Backend tuning chosen by measurement: for a 3x3 convolution oneDNN can run
// directly or with Winograd's algorithm (fewer multiplications, other
// layouts; AVX-512 and one thread only here), and Tessera's own Winograd
// kernel (dnnl_winograd.cc; AVX2, and AVX-512 where oneDNN's is not a
// candidate) can run on the direct convolution's layouts. All are timed on
// this machine, with the thread count the runs use, including the reorders
// each one's layouts would add at its input and output, and the fastest
// wins. The choice is stored in the payload (and the compatibility string
// pins the machine's instruction set).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>

#include "backends/dnnl/dnnl_lowering.h"
#include "backends/dnnl/dnnl_op_tables.h"
#include "backends/native/kernels/winograd_f4x3.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {
namespace {

/// The median milliseconds of each of `runs`, timed in interleaved rounds (one call of each per
/// round, after a warm-up round), so that a disturbance of a few milliseconds slows every run alike:
/// five rounds, or two once they have taken 5 ms a run (a large convolution is measured well enough
/// by two, and a model's first compile, or an open region's first shape, waits for every one of them).
std::vector<double> interleaved_median_milliseconds(const std::vector<std::function<void()>>& runs, dnnl::stream& stream) {
  std::vector<std::vector<double>> times(runs.size());
  for (const auto& run : runs) {
    run();
    stream.wait();
  }
  double total = 0;
  for (int round = 0; round < 5 && (round < 2 || total < 5.0 * static_cast<double>(runs.size())); ++round) {
    for (size_t c = 0; c < runs.size(); ++c) {
      const auto start = std::chrono::steady_clock::now();
      runs[c]();
      stream.wait();
      times[c].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      total += times[c].back();
    }
  }
  std::vector<double> medians;
  for (std::vector<double>& t : times) {
    std::sort(t.begin(), t.end());
    medians.push_back(t[(t.size() - 1) / 2]);
  }
  return medians;
}

/// Median milliseconds of `run` alone (interleaved_median_milliseconds of one run).
double median_milliseconds(std::function<void()> run, dnnl::stream& stream) {
  return interleaved_median_milliseconds({std::move(run)}, stream)[0];
}

/// The time of a reorder between two layouts (0 when they are equal).
double reorder_milliseconds(const memory::desc& from, const memory::desc& to, const dnnl::engine& engine,
                            dnnl::stream& stream) {
  if (from == to) return 0;
  memory src(from, engine), dst(to, engine);
  dnnl::reorder reorder(src, dst);
  return median_milliseconds([&] { reorder.execute(stream, src, dst); }, stream);
}

/// The arguments of `step`'s primitive (pd) on scratch memory of the layouts it chose: what a
/// measurement runs it on.
std::unordered_map<int, memory> scratch_args(const Lowering& lowering, const Step& step, const dnnl::primitive_desc_base& pd) {
  const dnnl::engine& engine = lowering.engine();
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
  return args;
}

/// Below this many multiply-adds (about 0.1 ms of a direct convolution on one
/// AVX2 core) Tessera's Winograd kernel is not tried.
constexpr int64_t kMinWinogradMultiplyAdds = int64_t{1} << 23;
/// Outputs a side at most that convolutions of open-dims regions are timed on (choose_convolution_algorithm).
constexpr int64_t kOpenTimingSide = 32;

}  // namespace

std::string measured_algorithm_note(int32_t algorithm) {
  if (algorithm == kTesseraWinograd) return "Winograd F(4x4, 3x3), Tessera's kernel: measured faster than the direct convolution";
  if (algorithm == static_cast<int32_t>(dnnl::algorithm::convolution_winograd)) {
    return "Winograd, oneDNN's: measured faster than the direct convolution";
  }
  return "";
}

std::vector<ConvolutionAlgorithm> convolution_candidates(bool open_dims) {
  std::vector<ConvolutionAlgorithm> candidates;
  for (const ConvolutionAlgorithm& candidate : convolution_algorithms()) {
    if (!open_dims) {
      candidates.push_back(candidate);
    } else if (static_cast<int32_t>(candidate.algorithm) == kTesseraWinograd) {
      candidates.insert(candidates.begin(), candidate);
    } else if (candidate.algorithm == dnnl::algorithm::convolution_direct) {
      candidates.push_back(candidate);
    }
  }
  return candidates;
}

int32_t choose_convolution_algorithm(const Lowering& lowering, Step step, const std::vector<memory::desc>& requests,
                                     const memory::desc& output_request, double* milliseconds) {
  if (milliseconds) *milliseconds = 0;
  const int32_t direct = static_cast<int32_t>(dnnl::algorithm::convolution_direct);
  // TESSERA_DNNL_TUNE=0 turns measurement off (direct always), for
  // reproducible layouts in tests and comparisons.
  // TESSERA_DNNL_TUNE=winograd takes Tessera's Winograd kernel, unmeasured,
  // wherever its plan applies (tests that must run it whatever the timing
  // says, as in a sanitizer build; comparisons). TESSERA_DNNL_TUNE=onednn-winograd
  // takes oneDNN's Winograd, unmeasured, wherever it offers an implementation (tests).
  const char* tune = std::getenv("TESSERA_DNNL_TUNE");
  if (tune && std::string(tune) == "0") return direct;
  const bool force_winograd = tune && std::string(tune) == "winograd";
  const bool force_onednn_winograd = tune && std::string(tune) == "onednn-winograd";
  // Winograd (oneDNN's and Tessera's): 2-D, 3x3, stride 1, no dilation, no groups.
  if (step.kind != StepKind::kConvolution) return direct;
  const memory::desc& weights = lowering.desc(step.inputs[1]);
  const memory::dims w = weights.dims();
  if (w.size() != 4 || w[2] != 3 || w[3] != 3) return direct;
  for (size_t i = 0; i < 2; ++i) {
    if (step.ints[i] != 1 || step.ints[2 + i] != 0) return direct;
  }
  const dnnl::engine& engine = lowering.engine();
  dnnl::stream stream(engine);
  // Timed on one image of a batch: the candidates rank per image as they do for the batch, and a
  // batch of 8 is measured in an eighth of the time. Not where a binary post-op reads a full-size
  // operand, nor from a layout no format tag names (its one-image form is not known).
  const memory::desc full_source = lowering.desc(step.inputs[0]);
  const int64_t batch = full_source.dims().empty() ? 1 : full_source.dims()[0];
  bool one_image = batch > 1 && format_tag_of(full_source) >= 0;
  for (const PostOp& p : step.post_ops) one_image &= p.kind != PostOpKind::kBinary;
  // In a region of open dims the choice is kept for every later shape (AlgorithmMemo), so the first
  // shape is one size among many: timed on a crop of at most kOpenTimingSide outputs a side (both
  // candidates alike; fewer tiles to share Winograd's weights over only favours the direct one), since
  // every large layer timed whole made a ResNet-18 trunk's first call at 448x448 take 0.8-1.0 s against
  // 0.2 s with the same choices unmeasured.
  const bool open_dims = lowering.algorithm_memo() != nullptr;
  const memory::dims full_output = output_request.dims();
  int64_t crop_out[2] = {0, 0};  // 0: not cropped
  double crop_share = 1;         // the cropped outputs' share of the whole
  const bool tagged = full_source.data.format_kind == dnnl_format_kind_any || format_tag_of(full_source) >= 0;
  if (open_dims && tagged && full_source.dims().size() == 4 && full_output.size() == 4 && step.ints.size() >= 8) {
    for (int d = 0; d < 2; ++d) {
      if (full_output[static_cast<size_t>(2 + d)] <= kOpenTimingSide) continue;
      crop_out[d] = kOpenTimingSide;
      crop_share *= static_cast<double>(kOpenTimingSide) / static_cast<double>(full_output[static_cast<size_t>(2 + d)]);
    }
  }
  const bool cropped = crop_out[0] > 0 || crop_out[1] > 0;
  auto image = [&](const memory::desc& d, bool output) -> memory::desc {
    if ((!one_image && !cropped) || d == memory::desc()) return d;
    memory::dims dims = d.dims();
    if (one_image) dims[0] = 1;
    for (int i = 0; i < 2; ++i) {
      if (crop_out[i] == 0) continue;
      // 3x3, stride 1: outputs = inputs + both pads - 2.
      const int64_t pads = step.ints[static_cast<size_t>(4 + i)] + step.ints[static_cast<size_t>(6 + i)];
      dims[static_cast<size_t>(2 + i)] = output ? crop_out[i] : std::max<int64_t>(1, crop_out[i] + 2 - pads);
    }
    if (d.data.format_kind == dnnl_format_kind_any) return memory::desc(dims, d.data_type(), memory::format_tag::any);
    return layout_like(d, std::vector<int64_t>(dims.begin(), dims.end()));
  };
  const memory::desc source_layout = image(full_source, false);
  // In a region of open dims (the lowering has a memo) oneDNN's Winograd is not a candidate
  // (convolution_candidates): a ResNet-18 trunk's second shape took 90-200 ms to prepare with it against
  // 10-13 with direct convolutions (Zen 5), paid again at every new shape. Tessera's kernel is tried
  // first; where it does not apply, the direct convolution is taken without timing it.
  const std::vector<ConvolutionAlgorithm> candidates = convolution_candidates(open_dims);
  // Every candidate that applies is prepared first and then timed in interleaved rounds, so that a
  // disturbance lasting a few milliseconds (a process on the other core, the host taking the vCPU)
  // slows every candidate alike instead of one candidate's whole measurement: timed one after the
  // other, a 2.5x faster kernel lost to the direct convolution under a test beside it on the other core.
  struct Timed {
    int32_t algorithm = 0;
    const char* name = "";
    dnnl::primitive_desc_base pd;
    std::unordered_map<int, memory> args;
    std::optional<dnnl::primitive> primitive;
    std::optional<WinogradPlan> plan;
    double reorder_ms = 0;
  };
  std::vector<Timed> timed;
  thread_local std::vector<float> winograd_weights, winograd_scratch;
  for (const ConvolutionAlgorithm& candidate : candidates) {
    const int32_t algorithm = static_cast<int32_t>(candidate.algorithm);
    if (open_dims && algorithm == direct && timed.empty()) return direct;  // nothing else applies
    step.algorithm = algorithm;
    std::vector<memory::desc> roles = requests;
    for (size_t i = 0; i < roles.size(); ++i) {
      if (roles[i] == memory::desc()) roles[i] = lowering.desc(step.inputs[i]);
    }
    roles[0] = image(roles[0], false);
    roles.push_back(image(output_request, true));
    try {
      Timed t;
      t.algorithm = algorithm;
      t.name = candidate.name;
      t.pd = make_primitive_desc(step, roles, lowering.slot_descs(), engine);
      if (force_onednn_winograd && candidate.algorithm == dnnl::algorithm::convolution_winograd) return algorithm;
      // Timed on scratch memory of the chosen layouts.
      t.args = scratch_args(lowering, step, t.pd);
      if (algorithm == kTesseraWinograd) {
        // Tessera's kernel on the direct primitive's layouts, where it applies and the work is
        // worth it: on a small convolution it saves microseconds and costs accuracy (its
        // transforms round terms up to 8x larger than a direct sum's).
        std::vector<memory::desc> layouts;
        for (size_t i = 0; i < role_args(step).size(); ++i) layouts.push_back(role_desc(step, t.pd, i));
        const int64_t images = one_image ? batch : 1;
        const double multiply_adds = static_cast<double>(step_multiply_adds(step, layouts).value_or(0)) / crop_share;
        if (!force_winograd && multiply_adds * static_cast<double>(images) < kMinWinogradMultiplyAdds) continue;
        t.plan = winograd_plan(step, layouts);
        if (!t.plan) continue;
        // With AVX-512 a static region on one thread has oneDNN's Winograd: the 16-channel kernel only
        // where that is not a candidate. Timed beside it, Tessera's won some of a ResNet-18 trunk's
        // layers at 448x448 by a few percent, but whole runs were then 44-46 ms or 55 from compile to
        // compile (oneDNN alone: 45-47). On more than one thread oneDNN's is not used (see
        // dnnl_primitives.cc), and without Tessera's every 3x3 convolution there was direct: VGG-11 on
        // Zen 4 took 77-82 ms at 2 threads against 67 on one.
        if (!open_dims && t.plan->block == 16 && omp_get_max_threads() == 1) continue;
        // In a region of open dims, only where the first shape has a tile per kWinogradWeightsPerTile
        // filters: the transformed weights (4x the layer's) are kept for every later shape, smaller ones
        // included, where few tiles would share them (a ResNet-18 trunk first run at 448x448 timed its
        // 512-channel 14x14 layers faster with Winograd, and their 113 MB of transformed weights took 0.2-0.4
        // s to fault in on a VM, most of that first call).
        const int64_t tiles = ((full_output[2] + 3) / 4) * ((full_output[3] + 3) / 4);
        if (open_dims && !force_winograd && tiles * native::kWinogradWeightsPerTile < w[0] * w[1]) continue;
        if (force_winograd) return algorithm;
        // The kernel's time does not depend on the weights' values: zeros, in buffers kept for the
        // next layer (zeroing and faulting in fresh ones for every layer was a third of a compile).
        const size_t weight_size = static_cast<size_t>(t.plan->weight_floats()) + 16;
        const size_t scratch_size = static_cast<size_t>(t.plan->scratch_bytes()) / sizeof(float) + 16;
        if (winograd_weights.size() < weight_size) winograd_weights.assign(weight_size, 0.0f);
        if (winograd_scratch.size() < scratch_size) winograd_scratch.resize(scratch_size);
      } else {
        t.primitive.emplace(t.pd.get());
      }
      // The layouts around it: its source comes from the current layout, its
      // output goes on in the layout its neighbours use (the source's, for the
      // output's dims: with other channel counts a reorder to the source's own
      // desc failed, and every such convolution silently stayed direct).
      const memory::desc output_layout = role_desc(step, t.pd, step.inputs.size());
      const memory::dims output_dims = output_layout.dims();
      t.reorder_ms = reorder_milliseconds(source_layout, role_desc(step, t.pd, 0), engine, stream) +
                     reorder_milliseconds(output_layout,
                                          layout_like(source_layout, std::vector<int64_t>(output_dims.begin(), output_dims.end())),
                                          engine, stream);
      timed.push_back(std::move(t));
    } catch (const dnnl::error& e) {
      // This algorithm has no implementation for these shapes (or data types): keep the other.
      if (std::getenv("TESSERA_DNNL_TUNING_LOG")) {
        std::fprintf(stderr, "dnnl tuning: node %d %s: no implementation (%s)\n", step.node, candidate.name, e.what());
      }
    }
  }
  if (timed.empty()) return direct;
  std::vector<std::function<void()>> runs;
  for (Timed& t : timed) {
    if (t.plan) {
      runs.emplace_back([&t] { run_winograd_step(*t.plan, first_aligned(winograd_weights.data()), t.args, winograd_scratch.data()); });
    } else {
      runs.emplace_back([&t, &stream] { t.primitive->execute(stream, t.args); });
    }
  }
  const std::vector<double> medians = interleaved_median_milliseconds(runs, stream);
  double best_ms = 0;
  int32_t best = direct;
  for (size_t c = 0; c < timed.size(); ++c) {
    const double ms = medians[c] + timed[c].reorder_ms;
    if (std::getenv("TESSERA_DNNL_TUNING_LOG")) {
      std::fprintf(stderr, "dnnl tuning: node %d %s %s: %.3f ms (with reorders)\n", step.node, timed[c].name,
                   timed[c].pd.impl_info_str(), ms);
    }
    if (best_ms == 0 || ms < best_ms) {
      best_ms = ms;
      best = timed[c].algorithm;
    }
  }
  if (milliseconds) *milliseconds = best_ms;
  return best;
}

}  // namespace tessera::dnnl_backend

namespace tessera::dnnl_backend {

bool swish_pass_faster(const Lowering& lowering, const Step& step, const std::vector<memory::desc>& requests,
                       const memory::desc& output_request) {
  if (step.post_ops.empty() || step.kind != StepKind::kConvolution) return false;
  const PostOp& last = step.post_ops.back();
  if (last.kind != PostOpKind::kEltwise || last.algorithm != static_cast<int32_t>(dnnl::algorithm::eltwise_swish) ||
      last.alpha != 1.0f) {
    return false;
  }
  const char* tune = std::getenv("TESSERA_DNNL_TUNE");
  if (tune && std::string(tune) == "0") return false;
  if (tune && std::string(tune) == "swish") return true;  // tests that must run the loop whatever the timing
  // Below this many outputs the post-op costs microseconds: not worth a step (or a measurement).
  constexpr int64_t kMinSwishElements = int64_t{1} << 15;
  if (element_count(output_request) < kMinSwishElements) return false;
  const dnnl::engine& engine = lowering.engine();
  dnnl::stream stream(engine);
  std::vector<memory::desc> roles = requests;
  for (size_t i = 0; i < roles.size(); ++i) {
    if (roles[i] == memory::desc()) roles[i] = lowering.desc(step.inputs[i]);
  }
  roles.push_back(output_request);
  auto time_step = [&](const Step& candidate, bool with_loop) {
    dnnl::primitive_desc_base pd = make_primitive_desc(candidate, roles, lowering.slot_descs(), engine);
    std::unordered_map<int, memory> args = scratch_args(lowering, candidate, pd);
    memory& dst = args[DNNL_ARG_DST];
    // Finite values for the loop to read (a fresh buffer may hold NaN patterns that time alike anyway).
    std::memset(dst.get_data_handle(), 0, dst.get_desc().get_size());
    const int64_t floats = static_cast<int64_t>(dst.get_desc().get_size() / sizeof(float));
    dnnl::primitive primitive(pd.get());
    return median_milliseconds(
        [&] {
          primitive.execute(stream, args);
          if (with_loop) {
            stream.wait();
            auto* data = static_cast<float*>(dst.get_data_handle());
            run_swish(floats, data, data);
          }
        },
        stream);
  };
  try {
    Step without = step;
    without.post_ops.pop_back();
    const double fused_ms = time_step(step, false);
    const double split_ms = time_step(without, true);
    if (std::getenv("TESSERA_DNNL_TUNING_LOG")) {
      std::fprintf(stderr, "dnnl tuning: node %d swish post-op %.3f ms, Tessera's loop after it %.3f ms\n", step.node,
                   fused_ms, split_ms);
    }
    return split_ms < 0.95 * fused_ms;
  } catch (const dnnl::error&) {
    return false;
  }
}

}  // namespace tessera::dnnl_backend
