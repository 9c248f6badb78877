// A loaded oneDNN region: every primitive created once from the program,
// constants reordered once into the layouts their primitives chose, one
// workspace per concurrent run holding the intermediates (reused by
// liveness) and the scratchpad. Runs read the region's inputs and write its
// outputs in plain layout, in place in the runtime's memory.
#include "backends/dnnl/dnnl_region.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include "ir/error.h"

namespace tessera::dnnl_backend {
namespace {

constexpr int64_t kAlignment = 64;
int64_t align_up(int64_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }

/// The layout the step reads role `index` with: the slot's, or for a
/// reorder a reshaped, permuted or sub-block view of it (ints[0] = 1
/// reshape, 2 permute, 3 sub-block at the offsets that follow).
memory::desc input_view(const Step& step, size_t index, const memory::desc& slot_desc, const memory::desc& output_desc) {
  if (step.kind != StepKind::kReorder || step.ints.empty() || step.ints[0] == 0) return slot_desc;
  if (step.ints[0] == 1) {
    if (slot_desc.get_size() != output_desc.get_size()) throw_user_error("oneDNN payload: reshape changes the size");
    return slot_desc.reshape(output_desc.dims());
  }
  if (step.ints[0] == 2) {
    std::vector<int> permutation;
    for (size_t i = 1; i < step.ints.size(); ++i) permutation.push_back(static_cast<int>(step.ints[i]));
    if (static_cast<int>(permutation.size()) != slot_desc.data.ndims) throw_user_error("oneDNN payload: bad permutation");
    std::vector<char> seen(permutation.size(), 0);
    for (int p : permutation) {
      if (p < 0 || p >= static_cast<int>(permutation.size()) || seen[static_cast<size_t>(p)]++) {
        throw_user_error("oneDNN payload: bad permutation");
      }
    }
    // permute_axes maps input axis i to output axis permutation[i]; ONNX's perm gives, per output axis, its input axis.
    std::vector<int> inverse(permutation.size());
    for (size_t i = 0; i < permutation.size(); ++i) inverse[static_cast<size_t>(permutation[i])] = static_cast<int>(i);
    return slot_desc.permute_axes(inverse);
  }
  if (step.ints[0] == 3) {
    // A sub-block (Slice with steps of 1): offsets per axis into the source.
    const memory::dims source = slot_desc.dims();
    const memory::dims out = output_desc.dims();
    memory::dims offsets(step.ints.begin() + 1, step.ints.end());
    if (offsets.size() != source.size() || out.size() != source.size()) throw_user_error("oneDNN payload: bad sub-block view");
    for (size_t i = 0; i < source.size(); ++i) {
      if (offsets[i] < 0 || out[i] > source[i] || offsets[i] > source[i] - out[i]) {
        throw_user_error("oneDNN payload: sub-block view out of range");
      }
    }
    if (!is_plain(slot_desc)) throw_user_error("oneDNN payload: sub-block view of a blocked layout");
    return slot_desc.submemory_desc(out, offsets);
  }
  throw_user_error("oneDNN payload: unknown reorder view ", step.ints[0]);
}

/// Where a reorder step's output is a view of its input's bytes: the byte offset of its data in the
/// input, or -1. A reshape of a plain layout into a plain layout is all of it; a sub-block of a plain
/// layout is one contiguous part of it when it narrows one axis, takes a single index of every axis
/// before that one and all of every axis after it (a channel slice at batch 1).
int64_t view_offset(const Step& step, const memory::desc& input, const memory::desc& output) {
  if (step.kind != StepKind::kReorder || step.inputs.size() != 1 || step.ints.empty() || !step.post_ops.empty() ||
      !step.output_scales.empty() || step.src_zero_point != 0 || step.dst_zero_point != 0 ||
      input.data_type() != output.data_type() || !is_plain(input) || !is_plain(output)) {
    return -1;
  }
  if (step.ints[0] == 1) return input.get_size() == output.get_size() ? 0 : -1;
  if (step.ints[0] != 3) return -1;
  const memory::dims source = input.dims(), out = output.dims();
  if (step.ints.size() != source.size() + 1 || out.size() != source.size()) return -1;
  size_t axis = 0;  // the first axis the slice does not take whole
  while (axis < source.size() && out[axis] == source[axis]) ++axis;
  for (size_t i = 0; i < axis; ++i) {
    if (step.ints[i + 1] != 0 || source[i] != 1) return -1;  // whole, and of size 1 (nothing to stride over)
  }
  for (size_t i = axis + 1; i < source.size(); ++i) {
    if (out[i] != source[i] || step.ints[i + 1] != 0) return -1;
  }
  int64_t offset = 0, stride = static_cast<int64_t>(memory::data_type_size(input.data_type()));
  for (size_t i = source.size(); i-- > 0;) {
    offset += step.ints[i + 1] * stride;
    stride *= source[i];
  }
  return offset;
}

/// A matmul with ints[0] == 1 runs on its source and output viewed as 2-D
/// (leading dims collapsed), so that its constant weights can be packed.
bool collapses_to_2d(const Step& step) { return step.kind == StepKind::kMatMul && !step.ints.empty() && step.ints[0] == 1; }

memory::desc collapsed(const memory::desc& desc) {
  const memory::dims dims = desc.dims();
  if (dims.size() < 2) throw_user_error("oneDNN payload: a collapsed matmul operand has rank ", dims.size());
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < dims.size(); ++i) rows *= dims[i];
  if (!is_plain(desc)) throw_user_error("oneDNN payload: a collapsed matmul operand is not plain");
  return desc.reshape({rows, dims.back()});
}

/// What identifies a constant slot's plain data within one region graph: its
/// transform, the constants it reads, its dims and parameters.
std::string constant_slot_key(const Slot& slot) {
  std::string key;
  auto put = [&](const void* p, size_t n) { key.append(static_cast<const char*>(p), n); };
  const auto type = static_cast<uint8_t>(slot.type);
  const auto transform = static_cast<int32_t>(slot.transform);
  put(&type, sizeof type);
  put(&transform, sizeof transform);
  const uint64_t counts[3] = {slot.sources.size(), slot.dims.size(), slot.floats.size()};
  put(counts, sizeof counts);
  put(slot.sources.data(), slot.sources.size() * sizeof(int32_t));
  put(slot.dims.data(), slot.dims.size() * sizeof(int64_t));
  put(slot.floats.data(), slot.floats.size() * sizeof(float));
  return key;
}

}  // namespace

namespace {
/// Element-wise steps with fewer output elements run on one thread (DnnlRegion's constructor).
constexpr int64_t kSingleThreadElements = 4096;
/// Multiply-adds below which a convolution or matmul runs on one thread (about 10 µs of one core).
constexpr int64_t kSingleThreadMacs = int64_t{1} << 19;
/// A float32 gemm:jit matmul of at least this many rows and multiply-adds
/// goes to another backend (slow_kernel_reason).
constexpr int64_t kSlowGemmMinRows = 16;
constexpr int64_t kSlowGemmMinMacs = int64_t{1} << 22;

/// Why the implementation oneDNN chose for `step` is much slower than what
/// another backend runs, or "": its reference kernel on a large output, or a
/// float32 matmul of many rows answered by gemm:jit. Below AVX-512, oneDNN 2.6
/// has no brgemm matmul, and its gemm:jit was never faster than the native
/// packed GEMM and up to 2x slower (Zen 3, one thread, ViT-B/16's shapes:
/// 197x768 x 768x3072 20.2 ms against 10.3, x 768x2304 7.9 against 7.7,
/// 197x3072 x 3072x768 11.0 against 10.4); and a float32 matmul of one to
/// three rows against large weights, answered by brgemm or gemm:jit (below).
/// Small products stay: there it is as fast.
std::string slow_kernel_reason(const Step& step, const dnnl::primitive_desc_base& pd, const std::vector<memory::desc>& roles) {
  const std::string impl = pd.impl_info_str();
  if (is_reference(pd) && element_count(roles.back()) >= kReferenceGuardElements) {
    return "oneDNN has only its reference kernel (" + impl + ") for it, typically 100x slower than its JIT kernels, and no "
           "layout tried had another";
  }
  if (step.kind == StepKind::kMatMul && impl.rfind("gemm:", 0) == 0 && roles[0].data_type() == memory::data_type::f32) {
    const memory::dims src = roles[0].dims();
    const int64_t rows = src.size() >= 2 ? src[src.size() - 2] : 1;
    if (rows >= kSlowGemmMinRows && element_count(roles.back()) * src.back() >= kSlowGemmMinMacs) {
      return "oneDNN runs this float32 matmul with " + impl + " at " + effective_isa_name() +
             " (it has brgemm kernels from AVX-512 on), up to 2x slower than the native packed GEMM";
    }
  }
  // oneDNN 2.6 streams the weights of a product of one or two rows (a classifier's Gemm at batch 1, a
  // decoder's token) at half to two thirds the rate of native's one-row kernel (Zen 4, one thread,
  // 1 x 4096 x 4096: brgemm 4.35 ms, gemm:jit capped at AVX2 2.79, native 1.85; two rows 5.26 and
  // 5.22 against 3.18-3.77; even from four rows on). AlexNet at 1 thread: 25 -> 17 ms. Inside a model the
  // rest of the run evicts a classifier's weights from the caches, and there oneDNN is slower still: the
  // Gemms of 13 zoo classifiers at batch 1 (0.5 to 2 M weights: 512 x 1000 to 2048 x 1000) took 1.6-2.6x
  // native's time at one thread and up to 2.1x at two (Zen 4). Alone and hot in the caches, neither is
  // faster from 256 x 256 on (1 x 512 x 1000: 0.026 and 0.028 ms; 1 x 2048 x 1000 at two threads 0.096
  // against 0.051), so products of kSlowBrgemmMinWeights (64 K) weights and more go. With their rows open
  // such products are native's from the start (open_rows_product, dnnl_declarations.cc).
  if (step.kind == StepKind::kMatMul && (impl.rfind("brg", 0) == 0 || impl.rfind("gemm:", 0) == 0) &&
      roles[0].data_type() == memory::data_type::f32 && roles.size() >= 3) {
    const memory::dims src = roles[0].dims();
    const int64_t rows = src.size() >= 2 ? element_count(roles[0]) / src.back() : 1;
    if (rows < kSlowBrgemmMaxRows && element_count(roles[1]) >= kSlowBrgemmMinWeights) {
      return "oneDNN runs this float32 matmul of " + std::to_string(rows) + " row" + (rows == 1 ? "" : "s") + " with " +
             impl + ", which streams the weights at about half the rate of the native one-row kernel";
    }
  }
  return "";
}

/// Whether the step's work is below a bound: multiply-adds of a convolution or matmul under
/// `max_macs`, output elements of the rest under `max_elements`. `roles`: its layouts, inputs then the output.
bool work_below(const Step& step, const std::vector<memory::desc>& roles, int64_t max_macs, int64_t max_elements) {
  switch (step.kind) {
    case StepKind::kConvolution:
    case StepKind::kDeconvolution:
    case StepKind::kMatMul:
    case StepKind::kInnerProduct: {
      const std::optional<int64_t> macs = step_multiply_adds(step, roles);
      return macs && *macs < max_macs;
    }
    default:
      return element_count(roles.back()) < max_elements;
  }
}

/// Whether the step's work is below what is worth a second thread.
bool little_work(const Step& step, const std::vector<memory::desc>& roles) {
  return work_below(step, roles, kSingleThreadMacs, kSingleThreadElements);
}

/// Whether a step that runs on the session's threads is small enough that one thread may be faster:
/// fewer than 2^24 multiply-adds (a convolution or matmul; about 100 µs of one core) or 2^20 output
/// elements (the rest). Larger steps gain from every thread, unless the region is small (below).
bool worth_measuring_on_one_thread(const Step& step, const std::vector<memory::desc>& roles) {
  return work_below(step, roles, int64_t{1} << 24, int64_t{1} << 20);
}

/// A region of fewer multiply-adds in all (about 10 ms of one core) has every step measured on one
/// thread too, so that it can run on one thread throughout where that is faster: where waking an idle
/// core costs 0.1-1 ms (a VM whose idle vCPU halts to its host), ShuffleNetV2's 2-thread runs took 2-3x
/// its 1-thread ones, its few larger convolutions included (conv5: 1.0 ms against 0.36 on one thread).
constexpr int64_t kSmallRegionMacs = int64_t{1} << 30;

/// "12.3 µs" for milliseconds `ms`.
std::string format_microseconds(double ms) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f \u00b5s", ms * 1000);
  return text;
}
}  // namespace

DnnlRegion::DnnlRegion(const Graph& region, Program program, const dnnl::engine& engine, int num_threads,
                       SharedConstants* shared, bool measure_step_threads)
    : region_(region), program_(std::move(program)), engine_(engine), num_threads_(num_threads) {
  // oneDNN fixes a primitive's thread count when it is created: create them with the session's.
  omp_set_num_threads(num_threads_);
  const size_t num_slots = program_.slots.size();
  const size_t num_values = region.values.size();
  // A plan made on one thread may name oneDNN's Winograd, which runs on one thread only
  // (make_primitive_desc): on more, such a convolution is direct, on the layouts its source and
  // output were given; its weights take the direct primitive's (they are laid out by their reader).
  winograd_made_direct_.assign(program_.steps.size(), 0);
  for (size_t k = 0; k < program_.steps.size(); ++k) {
    Step& step = program_.steps[k];
    if (num_threads_ == 1 || step.kind != StepKind::kConvolution ||
        step.algorithm != static_cast<int32_t>(dnnl::algorithm::convolution_winograd)) {
      continue;
    }
    step.algorithm = static_cast<int32_t>(dnnl::algorithm::convolution_direct);
    step.any_roles &= ~(1u | (1u << step.inputs.size()));
    winograd_made_direct_[k] = 1;
  }
  descs_.reserve(num_slots);
  std::vector<char> is_input(num_values, 0), is_output(num_values, 0);
  for (ValueId id : region.inputs) is_input[static_cast<size_t>(id)] = 1;
  for (ValueId id : region.outputs) is_output[static_cast<size_t>(id)] = 1;
  for (const Slot& slot : program_.slots) {
    if (slot.dims.size() > 6) throw_user_error("oneDNN payload: slot of rank ", slot.dims.size());
    int64_t count = 1;
    for (int64_t d : slot.dims) {
      if (d <= 0 || d > kMaxSlotDim) throw_user_error("oneDNN payload: slot dim ", d);
      count *= d;
      if (count > kMaxSlotElements) throw_user_error("oneDNN payload: slot too large");
    }
    const bool of_reader = slot.format_tag == kLayoutOfReader;
    if (of_reader && slot.kind != Slot::Kind::kConstant) throw_user_error("oneDNN payload: only constants take their reader's layout");
    if (!of_reader && (slot.format_tag < 0 || slot.format_tag >= dnnl_format_tag_last || slot.format_tag == dnnl_format_tag_any)) {
      throw_user_error("oneDNN payload: format tag ", slot.format_tag);
    }
    if (slot.kind == Slot::Kind::kInput || slot.kind == Slot::Kind::kOutput) {
      if (slot.value < 0 || static_cast<size_t>(slot.value) >= num_values) throw_user_error("oneDNN payload: slot names value ", slot.value);
      const Value& v = region.values[static_cast<size_t>(slot.value)];
      const bool boundary = slot.kind == Slot::Kind::kInput ? is_input[static_cast<size_t>(slot.value)] != 0
                                                            : is_output[static_cast<size_t>(slot.value)] != 0;
      if (!boundary || !v.type.is_static() || slot.format_tag != 0 || !slot_type_matches(slot.type, v.type.dtype) ||
          shape_numel(v.type.dims) != count) {
        throw_user_error("oneDNN payload: slot for '", v.name, "' does not match the region's boundary value");
      }
    }
    try {
      descs_.push_back(desc_of(slot));
    } catch (const dnnl::error& e) {
      throw_user_error("oneDNN payload: layout of a slot cannot be made: ", e.what());
    }
  }

  // Steps: every slot read must exist by then; outputs are intermediates or region outputs.
  std::vector<char> defined(num_slots, 0);
  for (size_t s = 0; s < num_slots; ++s) {
    const Slot::Kind kind = program_.slots[s].kind;
    defined[s] = kind == Slot::Kind::kInput || kind == Slot::Kind::kConstant;
  }
  auto check_read = [&](int32_t slot) {
    if (slot < 0 || static_cast<size_t>(slot) >= num_slots || !defined[static_cast<size_t>(slot)]) {
      throw_user_error("oneDNN payload: a step reads slot ", slot, " before it is written");
    }
  };
  int64_t scratchpad = 0;
  std::vector<char> layout_resolved(num_slots, 0);
  std::vector<dnnl::primitive_desc_base> pending_primitives;  // per step, in order
  // Per step: whether it is measured on one thread too, and the primitive descriptor made for one.
  enum : char { kSmallStep = 1, kLargeStep = 2 };
  std::vector<char> single_candidates;  // 0, kSmallStep or kLargeStep (measured only in a small region)
  std::vector<std::optional<dnnl::primitive_desc_base>> pending_single;
  std::vector<std::vector<memory::desc>> large_requests;  // per kLargeStep: what its descriptor asks for
  int64_t region_macs = 0;
  // The step's descriptor for one thread, where it keeps every layout of `roles` (else none).
  auto single_desc = [&](const Step& step, const std::vector<memory::desc>& requests,
                         const std::vector<memory::desc>& roles) -> std::optional<dnnl::primitive_desc_base> {
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    std::optional<dnnl::primitive_desc_base> single;
    try {
      dnnl::primitive_desc_base one = make_primitive_desc(step, requests, descs_, engine_, /*avoid_brdgmm=*/true);
      bool same = !is_brdgmm(one);
      for (size_t i = 0; i < roles.size(); ++i) same &= role_desc(step, one, i) == roles[i];
      if (same) {
        scratchpad = std::max<int64_t>(scratchpad, static_cast<int64_t>(one.scratchpad_desc().get_size()));
        single = one;
      }
    } catch (const dnnl::error&) {
      // no one-thread primitive for it: the step keeps the session's threads
    }
    omp_set_num_threads(threads);
    return single;
  };
  for (const Step& step : program_.steps) {
    finite_only_ |= finite_only_reason(step).has_value();
    for (int32_t slot : step.inputs) check_read(slot);
    for (const PostOp& p : step.post_ops) {
      if (p.kind != PostOpKind::kEltwise) check_read(p.slot);
    }
    if (step.output < 0 || static_cast<size_t>(step.output) >= num_slots) throw_user_error("oneDNN payload: step output slot");
    const Slot::Kind out_kind = program_.slots[static_cast<size_t>(step.output)].kind;
    if (out_kind == Slot::Kind::kInput || out_kind == Slot::Kind::kConstant) {
      throw_user_error("oneDNN payload: a step writes an input or a constant");
    }
    if (step.node < -1 || step.node >= static_cast<int32_t>(region.nodes.size())) throw_user_error("oneDNN payload: step node");
    const memory::desc& out_desc = descs_[static_cast<size_t>(step.output)];
    std::vector<memory::desc> roles;
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      roles.push_back(input_view(step, i, descs_[static_cast<size_t>(step.inputs[i])], out_desc));
    }
    roles.push_back(out_desc);
    if (collapses_to_2d(step)) {
      try {
        roles[0] = collapsed(roles[0]);
        roles.back() = collapsed(roles.back());
      } catch (const dnnl::error& e) {
        throw_user_error("oneDNN payload: a collapsed matmul cannot be viewed as 2-D: ", e.what());
      }
    }
    // Ask for `any` where lowering did, so oneDNN picks the implementation it picked then.
    std::vector<memory::desc> requests = roles;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (step.any_roles & (1u << i)) requests[i] = memory::desc(roles[i].dims(), roles[i].data_type(), memory::format_tag::any);
    }
    CompiledStep compiled;
    // A step of little work (few elements for the element-wise, reorders, pooling, normalisation,
    // softmax and concat steps; few multiply-adds for convolutions and matmuls) is created and run on
    // one thread: handing so little work to a second thread costs more than it saves, and far more
    // when that thread has to be woken or waits for a core another process holds (a 2-thread
    // attention encoder of 16 tokens went from 0.16 ms to 1.6 ms beside one busy process, each of
    // its tiny matmuls waiting at an OpenMP barrier for a descheduled thread). Where oneDNN chose
    // a layout for the thread count at compile time and picks another for one thread, the step
    // keeps the region's threads.
    compiled.threads = little_work(step, roles) ? 1 : num_threads_;
    omp_set_num_threads(compiled.threads);
    // Every role's layout but those of constants that take theirs from this (their first) reader.
    auto keeps_layouts = [&](const dnnl::primitive_desc_base& pd) {
      for (size_t i = 0; i < roles.size(); ++i) {
        const bool reader_sets = i < step.inputs.size() &&
                                 program_.slots[static_cast<size_t>(step.inputs[i])].format_tag == kLayoutOfReader &&
                                 !layout_resolved[static_cast<size_t>(step.inputs[i])];
        if (!reader_sets && role_desc(step, pd, i) != roles[i]) return false;
      }
      return true;
    };
    try {
      // oneDNN 2.6's brgemm depthwise convolution (`brdgmm_dw`), created for one thread in a session of
      // more, can corrupt the heap while it builds its kernel: SSDlite-320 at two threads threw
      // std::bad_array_new_length from that creation, or crashed or hung in a later one (one-thread
      // sessions were fine). Such a step takes another implementation (avoid_brdgmm), or, where oneDNN
      // offers none, the session's threads.
      dnnl::primitive_desc_base pd = make_primitive_desc(step, requests, descs_, engine_, compiled.threads < num_threads_);
      if (compiled.threads < num_threads_ && is_brdgmm(pd)) {
        compiled.threads = num_threads_;
        omp_set_num_threads(compiled.threads);
        pd = make_primitive_desc(step, requests, descs_, engine_);
      }
      if (compiled.threads != num_threads_ && !keeps_layouts(pd)) {
        compiled.threads = num_threads_;
        omp_set_num_threads(compiled.threads);
        pd = make_primitive_desc(step, requests, descs_, engine_);
      }
      // Constants that take their reader's layout get it now, from the first reader.
      for (size_t i = 0; i < step.inputs.size(); ++i) {
        const size_t slot = static_cast<size_t>(step.inputs[i]);
        if (program_.slots[slot].format_tag != kLayoutOfReader || layout_resolved[slot]) continue;
        if (!(step.any_roles & (1u << i))) throw_user_error("oneDNN payload: a constant's layout is never chosen");
        descs_[slot] = role_desc(step, pd, i);
        roles[i] = descs_[slot];
        layout_resolved[slot] = 1;
      }
      for (size_t i = 0; i < roles.size(); ++i) {
        if (role_desc(step, pd, i) != roles[i]) throw_user_error("oneDNN payload: step layout differs from the primitive's");
      }
      scratchpad = std::max<int64_t>(scratchpad, static_cast<int64_t>(pd.scratchpad_desc().get_size()));
      pending_primitives.push_back(pd);  // created below, for the steps that run it
      // A step of modest work may run faster on one thread than on the session's (the second thread's
      // wake-up and barrier cost as much as its share of a small reorder or convolution): measured
      // below where its one-thread primitive keeps every layout.
      // A larger step's is made after the loop, once the region's multiply-adds say it is small.
      const bool small_step = worth_measuring_on_one_thread(step, roles);
      region_macs += step_multiply_adds(step, roles).value_or(0);
      const bool candidate = measure_step_threads && num_threads_ > 1 && compiled.threads == num_threads_;
      single_candidates.push_back(candidate ? (small_step ? kSmallStep : kLargeStep) : 0);
      pending_single.push_back(candidate && small_step ? single_desc(step, requests, roles) : std::nullopt);
      large_requests.push_back(candidate && !small_step ? requests : std::vector<memory::desc>());
      compiled.roles = roles;
      if (step.kind == StepKind::kConcat && step.post_ops.empty() && !step.ints.empty()) {
        compiled.concat_copy = concat_copy_plan(roles, static_cast<int>(step.ints[0]));
      }
      compiled.max_pool = max_pool_plan(step, roles);
      compiled.swish = swish_plan(step, roles);
      // Where the Winograd kernel cannot run (a capped ISA, another CPU), the direct primitive does.
      compiled.winograd = winograd_plan(step, roles);
      if (compiled.winograd) scratchpad = std::max<int64_t>(scratchpad, compiled.winograd->scratch_bytes() + 64);
      // A step run by its own loop never runs the primitive: however slow that one is does not matter.
      if (step.node >= 0 && !compiled.concat_copy && !compiled.max_pool && !compiled.swish && !compiled.winograd) {
        if (std::string why = slow_kernel_reason(step, pd, roles); !why.empty()) slow_kernels_[step.node] = std::move(why);
      }
      for (const PostOp& p : step.post_ops) {
        if (p.kind == PostOpKind::kSum && p.slot != step.output) {
          const memory::desc& operand = descs_[static_cast<size_t>(p.slot)];
          if (operand == out_desc) {
            compiled.sum_bytes = out_desc.get_size();
          } else {
            compiled.sum_copy = dnnl::reorder(dnnl::reorder::primitive_desc(engine_, operand, engine_, out_desc));
          }
          compiled.sum_slot = p.slot;
        }
      }
    } catch (const dnnl::error& e) {
      throw_user_error("oneDNN payload: step ", steps_.size(), " cannot be created: ", e.what());
    }
    omp_set_num_threads(num_threads_);
    team_threads_ = std::max(team_threads_, compiled.threads);
    steps_.push_back(std::move(compiled));
    defined[static_cast<size_t>(step.output)] = 1;
  }
  for (ValueId id : region.outputs) {
    bool written = false;
    for (size_t s = 0; s < num_slots; ++s) {
      written |= program_.slots[s].kind == Slot::Kind::kOutput && program_.slots[s].value == id && defined[s];
    }
    if (!written) throw_user_error("oneDNN payload: region output '", region.value(id).name, "' is never written");
  }

  for (size_t s = 0; s < num_slots; ++s) {
    if (program_.slots[s].format_tag == kLayoutOfReader && !layout_resolved[s]) {
      throw_user_error("oneDNN payload: a constant's layout is never chosen");
    }
  }
  // Constants: reordered once into their layouts. Weights of Winograd steps are transformed for the
  // kernel from the same plain values; where nothing else reads them they get no oneDNN copy (never
  // read, it would add a quarter to the transform's memory).
  std::vector<std::vector<size_t>> winograd_readers(num_slots);
  std::vector<char> other_readers(num_slots, 0);
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step& step = program_.steps[k];
    CompiledStep& compiled = steps_[k];
    if (compiled.winograd && program_.slots[static_cast<size_t>(step.inputs[1])].kind != Slot::Kind::kConstant) {
      compiled.winograd.reset();  // computed weights: the direct primitive reads them
    }
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      if (compiled.winograd && i == 1) {
        winograd_readers[static_cast<size_t>(step.inputs[i])].push_back(k);
      } else {
        other_readers[static_cast<size_t>(step.inputs[i])] = 1;
      }
    }
    for (const PostOp& p : step.post_ops) {
      if (p.kind != PostOpKind::kEltwise) other_readers[static_cast<size_t>(p.slot)] = 1;
    }
  }
  for (size_t k = 0; k < steps_.size(); ++k) {
    if (single_candidates[k] != kLargeStep) continue;
    if (region_macs < kSmallRegionMacs) {
      pending_single[k] = single_desc(program_.steps[k], large_requests[k], steps_[k].roles);
    } else {
      single_candidates[k] = 0;
    }
  }
  // Primitives (their JIT kernels: a third of lowering a region for a new
  // shape) only for the steps that run them, not for those Tessera's own
  // loops run (Winograd, max pooling, swish, concat copies).
  for (size_t k = 0; k < steps_.size(); ++k) {
    CompiledStep& compiled = steps_[k];
    if (compiled.concat_copy || compiled.max_pool || compiled.swish || compiled.winograd) {
      compiled.single_candidate = single_candidates[k] != 0;  // its loop runs on the threads it is given
      continue;
    }
    omp_set_num_threads(compiled.threads);
    try {
      compiled.primitive = create_shared_primitive(pending_primitives[k]);
    } catch (const dnnl::error& e) {
      omp_set_num_threads(num_threads_);
      throw_user_error("oneDNN payload: step ", k, " cannot be created: ", e.what());
    } catch (const std::exception& e) {
      // oneDNN 2.6 can fail inside a kernel's creation with a C++ exception of its own (SSDlite's
      // one-thread brdgmm convolutions threw std::bad_array_new_length before they were avoided above):
      // the node is refused (node_refusal), so that the partitioner places it elsewhere.
      omp_set_num_threads(num_threads_);
      const int32_t node = program_.steps[k].node;
      if (node < 0) throw_user_error("oneDNN payload: step ", k, " cannot be created: ", e.what());
      compiled.unavailable = str_cat("oneDNN could not create its kernel ", pending_primitives[k].impl_info_str(), " (", e.what(), ")");
      slow_kernels_[node] = compiled.unavailable;
      continue;
    }
    if (pending_single[k]) {
      omp_set_num_threads(1);
      try {
        compiled.single_primitive = create_shared_primitive(*pending_single[k]);
        compiled.single_candidate = true;
      } catch (const std::exception&) {
        // no one-thread primitive: the step keeps the session's threads
      }
    }
  }
  omp_set_num_threads(num_threads_);
  pending_primitives.clear();
  constants_.resize(num_slots);
  dnnl::stream stream(engine_);
  std::unique_lock<std::mutex> shared_lock;
  if (shared) shared_lock = std::unique_lock<std::mutex>(shared->mutex);
  for (size_t s = 0; s < num_slots; ++s) {
    const Slot& slot = program_.slots[s];
    if (slot.kind != Slot::Kind::kConstant) continue;
    const std::string key = shared ? constant_slot_key(slot) : std::string();
    // The plain values: the constant itself where the slot takes it as it is, else a converted copy
    // (copying every weight first faulted in as many fresh pages again: 23% of a GPT-2-sized decoder's
    // page faults at session creation).
    std::vector<float> plain;
    const float* plain_values = nullptr;
    size_t plain_count = 0;
    auto load_plain = [&] {
      if (plain_values) return;
      plain_values = constant_plain_view(region, slot);
      if (plain_values) {
        plain_count = 1;
        for (int64_t d : slot.dims) plain_count *= static_cast<size_t>(d);
      } else {
        plain = constant_plain_data(region, slot);
        plain_values = plain.data();
        plain_count = plain.size();
      }
    };
    for (size_t k : winograd_readers[s]) {
      CompiledStep& compiled = steps_[k];
      const WinogradPlan& plan = *compiled.winograd;
      if (shared) {
        for (const SharedConstants::Winograd& w : shared->winograd) {
          if (w.slot_key == key && w.block == plan.block && w.in_blocks == plan.in_blocks &&
              w.out_blocks == plan.out_blocks) {
            compiled.winograd_weights = w.weights;
          }
        }
        if (compiled.winograd_weights) continue;
      }
      load_plain();
      if (static_cast<int64_t>(plain_count) != plan.out_channels * plan.in_channels * 9) {
        throw_user_error("oneDNN payload: Winograd weights of the wrong size");
      }
      // (A Buffer: large enough for huge pages, a fault per 2 MiB instead of per 4 KiB. A ResNet-18 trunk's
      // transformed weights are about 170 MB, which 4 KiB pages took 0.3-0.5 s to fault in on a VM.)
      const size_t bytes = static_cast<size_t>(plan.weight_floats()) * sizeof(float);
      auto weights = std::make_shared<const Buffer>(bytes, /*zero=*/false);  // (every float is written)
      write_winograd_weights(plan, plain_values, static_cast<float*>(weights->data()));
      compiled.winograd_weights = weights;
      if (shared) {
        shared->winograd.push_back({key, plan.block, plan.in_blocks, plan.out_blocks, weights});
      } else {
        own_constant_bytes_ += static_cast<int64_t>(bytes);
      }
    }
    if (!winograd_readers[s].empty() && !other_readers[s]) continue;
    if (shared) {
      for (const SharedConstants::Reordered& r : shared->reordered) {
        if (r.slot_key == key && r.desc == descs_[s]) constants_[s] = r.data;
      }
      if (constants_[s]) continue;
    }
    load_plain();
    memory::desc plain_layout = plain_desc(slot.dims);
    memory source(plain_layout, engine_, const_cast<float*>(plain_values));
    // In Tessera's buffers (2 MiB pages for large ones, allocate_aligned) rather than oneDNN's own.
    auto storage = std::make_shared<Buffer>(descs_[s].get_size(), true);  // zeros in any padding of the layout
    constants_[s] = memory(descs_[s], engine_, storage->data());
    dnnl::reorder(source, constants_[s]).execute(stream, source, constants_[s]);
    if (shared) {
      shared->reordered.push_back({key, descs_[s], constants_[s], storage});
    } else {
      constant_storage_.push_back(storage);
      own_constant_bytes_ += static_cast<int64_t>(descs_[s].get_size());
    }
    stream.wait();  // `plain` is freed at the end of this iteration
  }

  // Workspace: intermediates by liveness, sharing ranges where a step writes in place
  // (dnnl_workspace.cc), then the scratchpad.
  std::vector<StepMemoryFacts> facts(steps_.size());
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step& step = program_.steps[k];
    const CompiledStep& compiled = steps_[k];
    if (compiled.sum_slot >= 0 && compiled.sum_bytes != 0) facts[k].sum_slot = compiled.sum_slot;
    if (compiled.concat_copy) facts[k].concat = &*compiled.concat_copy;
    for (size_t i = 0; i < step.inputs.size(); ++i) {
      facts[k].input_is_slot.push_back(compiled.roles[i] == descs_[static_cast<size_t>(step.inputs[i])]);
    }
    facts[k].view_offset = view_offset(step, descs_[static_cast<size_t>(step.inputs.empty() ? 0 : step.inputs[0])],
                                       descs_[static_cast<size_t>(step.output)]);
  }
  WorkspacePlan workspace = plan_workspace(program_, descs_, facts);
  offsets_ = std::move(workspace.offsets);
  workspace_bytes_ = workspace.bytes;
  for (size_t k = 0; k < steps_.size(); ++k) {
    steps_[k].sum_in_place = workspace.sum_in_place[k] != 0;
    steps_[k].view = workspace.view[k] != 0;
    steps_[k].concat_in_place = std::move(workspace.concat_in_place[k]);
  }
  scratchpad_offset_ = workspace_bytes_;
  workspace_bytes_ += align_up(scratchpad);
  // (Not for a region with a step oneDNN could not create: its node is refused, the region compiled again.)
  const bool complete = std::all_of(steps_.begin(), steps_.end(), [](const CompiledStep& c) { return c.unavailable.empty(); });
  if (measure_step_threads && complete) choose_step_threads();
}

DnnlRegion::~DnnlRegion() = default;

std::string DnnlRegion::node_precision(size_t node) const {
  for (const Step& step : program_.steps) {
    if (step.node != static_cast<int32_t>(node) || step.inputs.empty()) continue;
    const bool compute = step.kind == StepKind::kConvolution || step.kind == StepKind::kDeconvolution ||
                         step.kind == StepKind::kMatMul || step.kind == StepKind::kInnerProduct;
    if (compute && program_.slots[static_cast<size_t>(step.inputs[0])].type == SlotType::kBFloat16) return "bf16";
  }
  return "";
}

std::string DnnlRegion::node_algorithm(size_t node) const {
  std::string note;
  bool convolution = false, swish = false;
  const CompiledStep* one_thread = nullptr;
  for (size_t k = 0; k < program_.steps.size(); ++k) {
    const Step& step = program_.steps[k];
    if (step.node != static_cast<int32_t>(node)) continue;
    swish |= steps_[k].swish.has_value();
    if (steps_[k].view) note = "a view of its input's bytes: nothing is copied";
    if (!steps_[k].concat_in_place.empty()) {
      const auto in_place = std::count(steps_[k].concat_in_place.begin(), steps_[k].concat_in_place.end(), 1);
      const size_t inputs = steps_[k].concat_in_place.size();
      if (in_place == static_cast<std::ptrdiff_t>(inputs)) {
        note = "in place: every input is written into the output where it belongs, nothing is copied";
      } else if (in_place > 0) {
        note = str_cat("in place for ", in_place, " of ", inputs, " inputs (written into the output where they "
                       "belong); the others are copied");
      }
    }
    if (steps_[k].single_candidate && steps_[k].threads == 1 && !one_thread) one_thread = &steps_[k];
    if (step.kind != StepKind::kConvolution || !note.empty()) continue;
    convolution = true;
    if (winograd_made_direct_[k]) {
      note = "direct convolution: its plan names oneDNN's Winograd, which runs in one-thread sessions only";
    } else if (step.algorithm == kTesseraWinograd && !steps_[k].winograd) {
      note = "direct convolution: Tessera's Winograd kernel was measured faster when compiling, but this CPU "
             "(or TESSERA_ISA) lacks AVX2";
    } else {
      note = measured_algorithm_note(step.algorithm);
    }
  }
  if (swish) {
    const std::string loop = convolution ? "SiLU as Tessera's loop after the convolution: measured faster than "
                                           "oneDNN's swish post-op"
                                         : "SiLU as Tessera's loop (oneDNN's eltwise_swish is about twice as slow)";
    note = note.empty() ? loop : note + "; " + loop;
  }
  if (one_thread) {
    // The times are what choose_step_threads measured; zero when TESSERA_DNNL_STEP_THREADS=one chose.
    const std::string threads = std::to_string(num_threads_);
    const std::string text =
        whole_one_ms_ > 0
            ? str_cat("runs on one thread, as its whole region does: whole runs measured ", format_microseconds(whole_one_ms_),
                      " against ", format_microseconds(whole_team_ms_), " on ", threads, " threads")
        : one_thread->team_ms > 0
            ? str_cat("runs on one thread: measured ", format_microseconds(one_thread->single_ms), " against ",
                      format_microseconds(one_thread->team_ms), " on ", threads, " threads")
            : "runs on one thread (TESSERA_DNNL_STEP_THREADS=one)";
    note = note.empty() ? text : note + "; " + text;
  }
  return note;
}

int64_t DnnlRegion::footprint_bytes() const {
  // The workspace is not counted: an open region lends one to every shape's region (run_in).
  // A JIT kernel and its descriptors: a session fed 1,400 shapes of a 3x3 convolution with relu grew by
  // about 145 KB per shape (Zen 3), its workspace a few KB of that.
  // Steps that Tessera's own loops run (Winograd, max pooling, swish, concat copies) have no primitive: a
  // plan and descriptors.
  constexpr int64_t kCodeBytesPerStep = 64 << 10, kPlanBytesPerStep = 4 << 10;
  int64_t bytes = own_constant_bytes_;
  for (const CompiledStep& step : steps_) bytes += step.primitive ? kCodeBytesPerStep : kPlanBytesPerStep;
  return bytes;
}

std::string DnnlRegion::node_refusal(size_t node) const {
  const auto found = slow_kernels_.find(static_cast<int32_t>(node));
  return found == slow_kernels_.end() ? "" : found->second;
}

std::unique_ptr<DnnlRegion::RunContext> DnnlRegion::make_context(bool own_workspace) const {
  auto context = std::make_unique<RunContext>(engine_);
  char* base = nullptr;  // without a workspace of its own: pointed at run_in's on every run
  if (own_workspace) {
    context->workspace = std::make_unique<Buffer>(static_cast<size_t>(std::max<int64_t>(workspace_bytes_, 64)), false);
    base = static_cast<char*>(context->workspace->data());
  }
  context->slots.reserve(descs_.size());
  for (size_t s = 0; s < descs_.size(); ++s) {
    const Slot& slot = program_.slots[s];
    if (slot.kind == Slot::Kind::kConstant) {
      context->slots.push_back(constants_[s]);
    } else if (slot.kind == Slot::Kind::kIntermediate) {
      context->slots.emplace_back(descs_[s], engine_, base && offsets_[s] >= 0 ? base + offsets_[s] : base);
    } else {
      context->slots.push_back(memory(descs_[s], engine_, static_cast<void*>(nullptr)));
    }
  }
  memory scratchpad(memory::desc({std::max<int64_t>(1, workspace_bytes_ - scratchpad_offset_)}, memory::data_type::u8,
                                 memory::format_tag::a),
                    engine_, base ? base + scratchpad_offset_ : nullptr);
  context->scratchpad = scratchpad;
  for (size_t k = 0; k < program_.steps.size(); ++k) {
    const Step& step = program_.steps[k];
    const std::vector<int> args = role_args(step);
    std::unordered_map<int, memory> map;
    // A role read or written through a view (reshaped, permuted, collapsed)
    // gets its own memory object, pointed at the slot's data on every run.
    auto role_memory = [&](size_t role, int32_t slot) {
      if (steps_[k].roles[role] == descs_[static_cast<size_t>(slot)]) return context->slots[static_cast<size_t>(slot)];
      return memory(steps_[k].roles[role], engine_, static_cast<void*>(nullptr));
    };
    for (size_t i = 0; i < step.inputs.size(); ++i) map[args[i]] = role_memory(i, step.inputs[i]);
    map[args.back()] = role_memory(step.inputs.size(), step.output);
    for (size_t p = 0; p < step.post_ops.size(); ++p) {
      if (step.post_ops[p].kind == PostOpKind::kBinary) {
        map[DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(p)) | DNNL_ARG_SRC_1] =
            context->slots[static_cast<size_t>(step.post_ops[p].slot)];
      }
    }
    map[DNNL_ARG_SCRATCHPAD] = scratchpad;
    context->args.push_back(std::move(map));
  }
  return context;
}

void DnnlRegion::run_in(ValueStore& store, void* workspace) const {
  std::unique_ptr<RunContext> context;
  {
    // Contexts with a workspace of their own serve run(), the others run_in() with one.
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = free_contexts_.size(); i-- > 0;) {
      if ((free_contexts_[i]->workspace != nullptr) != (workspace == nullptr)) continue;
      context = std::move(free_contexts_[i]);
      free_contexts_.erase(free_contexts_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (!context) {
    context = make_context(workspace == nullptr);
    if (!workspace) store.allocated(static_cast<size_t>(workspace_bytes_));
  }
  if (workspace) {
    auto* base = static_cast<char*>(workspace);
    for (size_t s = 0; s < program_.slots.size(); ++s) {
      if (program_.slots[s].kind == Slot::Kind::kIntermediate) {
        context->slots[s].set_data_handle(offsets_[s] >= 0 ? base + offsets_[s] : base);
      }
    }
    context->scratchpad.set_data_handle(base + scratchpad_offset_);
  }
  // Boundary values live in the runtime's memory: point the slots at them.
  for (size_t s = 0; s < program_.slots.size(); ++s) {
    const Slot& slot = program_.slots[s];
    if (slot.kind == Slot::Kind::kInput) {
      context->slots[s].set_data_handle(store.get(slot.value).data);
    } else if (slot.kind == Slot::Kind::kOutput) {
      context->slots[s].set_data_handle(store.output(slot.value).data);
    }
  }
  bind_views(*context);
  omp_set_num_threads(num_threads_);
  if (finite_only_) clear_fp_flags(team_threads_);
  const bool profiling = store.profiling();
  for (size_t k = 0; k < steps_.size(); ++k) {
    const auto start = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    execute_step(k, *context, steps_[k].threads);
    if (profiling) {
      context->stream.wait();
      std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
      const int32_t node = program_.steps[k].node;
      if (node >= 0) store.node_finished(static_cast<size_t>(node), elapsed.count());
    }
  }
  context->stream.wait();
  if (finite_only_ && fp_flags_raised(team_threads_)) store.made_non_finite();
  std::lock_guard<std::mutex> lock(mutex_);
  free_contexts_.push_back(std::move(context));
}

void DnnlRegion::bind_views(RunContext& context) const {
  for (size_t k = 0; k < program_.steps.size(); ++k) {
    const Step& step = program_.steps[k];
    const std::vector<int> args = role_args(step);
    for (size_t role = 0; role <= step.inputs.size(); ++role) {
      const size_t slot = static_cast<size_t>(role < step.inputs.size() ? step.inputs[role] : step.output);
      if (steps_[k].roles[role] != descs_[slot]) {
        context.args[k].at(args[role]).set_data_handle(context.slots[slot].get_data_handle());
      }
    }
  }
}

void DnnlRegion::execute_step(size_t k, RunContext& context, int threads) const {
  const CompiledStep& compiled = steps_[k];
  if (compiled.view) return;  // its output is its input's bytes
  if (!compiled.unavailable.empty()) {
    // Only where the node was kept here all the same (--place, a tuning record, an artifact).
    throw_user_error("oneDNN step ", k, " cannot run: ", compiled.unavailable, "; place its node on another backend");
  }
  const dnnl::primitive& primitive = threads == compiled.threads ? compiled.primitive : compiled.single_primitive;
  if (compiled.sum_slot >= 0 && !compiled.sum_in_place) {
    memory& operand = context.slots[static_cast<size_t>(compiled.sum_slot)];
    memory& output = context.slots[static_cast<size_t>(program_.steps[k].output)];
    if (compiled.sum_bytes) {
      std::memcpy(output.get_data_handle(), operand.get_data_handle(), compiled.sum_bytes);
    } else {
      compiled.sum_copy.execute(context.stream, operand, output);
    }
  }
  if (threads != num_threads_) omp_set_num_threads(threads);
  if (compiled.concat_copy) {
    const std::unordered_map<int, memory>& args = context.args[k];
    std::vector<const void*> sources;
    for (size_t i = 0; i < compiled.concat_copy->run_bytes.size(); ++i) {
      sources.push_back(args.at(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)).get_data_handle());
    }
    run_concat_copy(*compiled.concat_copy, sources, args.at(DNNL_ARG_DST).get_data_handle(), compiled.concat_in_place);
  } else if (compiled.max_pool) {
    const std::unordered_map<int, memory>& args = context.args[k];
    run_max_pool(*compiled.max_pool, static_cast<const float*>(args.at(DNNL_ARG_SRC).get_data_handle()),
                 static_cast<float*>(args.at(DNNL_ARG_DST).get_data_handle()));
  } else if (compiled.swish) {
    const std::unordered_map<int, memory>& args = context.args[k];
    run_swish(*compiled.swish, static_cast<const float*>(args.at(DNNL_ARG_SRC).get_data_handle()),
              static_cast<float*>(args.at(DNNL_ARG_DST).get_data_handle()));
  } else if (compiled.winograd) {
    const std::unordered_map<int, memory>& args = context.args[k];
    run_winograd_step(*compiled.winograd, static_cast<const float*>(compiled.winograd_weights->data()), args,
                      static_cast<float*>(args.at(DNNL_ARG_SCRATCHPAD).get_data_handle()));
  } else {
    primitive.execute(context.stream, context.args[k]);
  }
  if (threads != num_threads_) omp_set_num_threads(num_threads_);
}

}  // namespace tessera::dnnl_backend
