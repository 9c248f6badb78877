// A oneDNN region of a model compiled with open dims. oneDNN 2.6 creates
// convolution, pooling, eltwise and most other primitives for concrete dims
// only, so the region is lowered per set of input shapes at run time, the
// first time a call brings them: the region graph's types are inferred again
// at those dims (specialize_shapes), the nodes are checked against the
// declarations at them, and the lowering and loading of a static region run as
// they would at compile time. What a shape costs stays bounded:
// - constants in their chosen layouts (and Winograd's transformed weights) are
//   shared by every shape (SharedConstants), so a new shape copies no weights;
// - convolution algorithms are measured at the first shape only (AlgorithmMemo),
//   which is lowered with them; a later shape is lowered quickly first, its
//   direct convolutions on oneDNN's JIT kernels that are not brgemm-based
//   (kDirectJit: 0.15-0.45 ms to create against brgemm's 2-4.5 ms, a text
//   recogniser's four 3x3 convolutions at a new width on Zen 5), and in full
//   once it has been hit kTierUpCalls times (brgemm ran a ResNet-18 at one
//   size 12-20% faster there), or at once where the runtime asks for it
//   (ValueStore::prepare_in_full: a shape that keeps coming, where the quick
//   tier would not pay);
// - the workspace comes from the run's pool (ValueStore::borrow_workspace), which the
//   model's other regions share, or, where the run has none, one of the region's own
//   (grown to the largest shape run) serves every shape;
// - specialisations are kept in one cache per region, bounded by bytes (their
//   primitives' code) and by one bound for the whole process
//   (TESSERA_SHAPE_CACHE_MB, default 32 MiB): a region that adds one past it
//   drops its own least recently used first.
// A shape the declarations or the lowering refuse (an empty dim, a broadcast
// oneDNN cannot run, a reference kernel on a large tensor) is remembered as
// refused, and try_run answers false: the runtime runs the region's nodes on
// native for such calls.
#include "backends/dnnl/dnnl_open_region.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "backends/dnnl/dnnl_declarations.h"
#include "ir/error.h"
#include "ir/shape_util.h"
#include "ir/specialize_shapes.h"

namespace tessera::dnnl_backend {
namespace {

constexpr char kOpenMarker[] = "tessera-dnnl-open-dims-1";

/// Bytes held by every open region's specialisations in this process (what the bound applies to).
std::atomic<int64_t> g_cached_bytes{0};

int64_t shape_cache_bytes() {
  const char* mb = std::getenv("TESSERA_SHAPE_CACHE_MB");
  if (!mb || !*mb) return kDefaultShapeCacheBytes;
  char* end = nullptr;
  const long long value = std::strtoll(mb, &end, 10);
  if (*end != '\0' || value < 0 || value > (int64_t{1} << 40)) return kDefaultShapeCacheBytes;
  return static_cast<int64_t>(value) << 20;
}

/// The main node of a region node (a composite's first member) and the graph it lives in.
std::pair<const Node*, const Graph*> main_node(const Graph& region, const Node& node) {
  if (node.domain == "tessera" && node.op_type == "Composite") {
    const Attribute* body = node.attrs.find("body");
    if (body && body->graph && !body->graph->nodes.empty()) return {&body->graph->nodes[0], body->graph.get()};
  }
  return {&node, &region};
}

/// `value` of `graph` (a composite's body or the region) as a value of the region, or kNoValue
/// when it is made inside the body.
ValueId region_value(const Graph& region, const Node& node, const Graph& graph, ValueId value) {
  if (&graph == &region) return value;
  const auto at = std::find(graph.inputs.begin(), graph.inputs.end(), value);
  return at == graph.inputs.end() ? kNoValue : node.inputs[static_cast<size_t>(at - graph.inputs.begin())];
}

bool is_heavy(const Node& node) {
  static const char* const kHeavy[] = {"Conv", "ConvTranspose", "MatMul", "Gemm", "MaxPool", "AveragePool"};
  return node.domain.empty() && std::find_if(std::begin(kHeavy), std::end(kHeavy),
                                             [&](const char* op) { return node.op_type == op; }) != std::end(kHeavy);
}

}  // namespace

std::map<int32_t, std::string> shape_refusals(const Graph& region) {
  std::map<int32_t, std::string> refusals;
  for (size_t i = 0; i < region.nodes.size(); ++i) {
    const Node& node = region.nodes[i];
    const auto [main, graph] = main_node(region, node);
    // A product of two computed operands whose second has open dims (attention's Q K^T and P V over a
    // growing key/value cache): oneDNN would need a primitive for every length, a new one at each
    // decoded token, and reads a bound cache only through a copy; native runs it at any length and
    // reads the cache in place (its MatMul and MatMulTransposedB take strided operands).
    if (main->op_type != "MatMul" || !main->domain.empty() || main->inputs.size() < 2) continue;
    const ValueId b = region_value(region, node, *graph, main->inputs[1]);
    const bool computed = b == kNoValue || !region.is_constant(b);
    if (computed && !graph->value(main->inputs[1]).type.is_static()) {
      refusals.emplace(static_cast<int32_t>(i), kOpenDimsProductRefusal);
    }
  }
  // Light nodes not connected, inside the region, to any product left in it (a decoder's attention mask
  // beside its projections): nothing fuses with them here, and their open dims (past + seq for the mask)
  // would make the region lower again at each of their sizes, which the products do not need. Native
  // runs them at any size. Components by union-find over the values the region's nodes share.
  std::vector<size_t> parent(region.nodes.size());
  for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  auto find = [&](size_t i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  std::map<ValueId, size_t> producer;
  for (size_t i = 0; i < region.nodes.size(); ++i) {
    for (ValueId out : region.nodes[i].outputs) {
      if (out != kNoValue) producer[out] = i;
    }
  }
  for (size_t i = 0; i < region.nodes.size(); ++i) {
    for (ValueId in : region.nodes[i].inputs) {
      const auto p = producer.find(in);
      if (p != producer.end()) parent[find(i)] = find(p->second);
    }
  }
  std::set<size_t> with_product;
  for (size_t i = 0; i < region.nodes.size(); ++i) {
    if (is_heavy(*main_node(region, region.nodes[i]).first) && !refusals.count(static_cast<int32_t>(i))) {
      with_product.insert(find(i));
    }
  }
  if (with_product.empty()) return refusals;  // a region of light steps only: the probe sends it to native
  for (size_t i = 0; i < region.nodes.size(); ++i) {
    if (refusals.count(static_cast<int32_t>(i)) || with_product.count(find(i))) continue;
    bool open = false;
    for (ValueId v : region.nodes[i].outputs) open |= v != kNoValue && !region.value(v).type.is_static();
    if (open) {
      refusals.emplace(static_cast<int32_t>(i),
                       "with open dims, not connected to any product of its region: native runs it at every size "
                       "without lowering the region again for each of its own");
    }
  }
  return refusals;
}

std::vector<uint8_t> open_region_payload() {
  return std::vector<uint8_t>(kOpenMarker, kOpenMarker + sizeof kOpenMarker - 1);
}

bool is_open_region_payload(std::span<const uint8_t> payload) {
  return payload.size() == sizeof kOpenMarker - 1 && std::memcmp(payload.data(), kOpenMarker, payload.size()) == 0;
}

OpenDnnlRegion::OpenDnnlRegion(const Graph& region, const dnnl::engine& engine, int num_threads,
                               const std::vector<Shape>& probe_input_dims)
    : region_(region), engine_(engine), num_threads_(num_threads), max_bytes_(shape_cache_bytes()) {
  for (ValueId id : region.inputs) {
    if (!region.value(id).type.is_tensor() || !region.value(id).type.rank_known) {
      throw_user_error("oneDNN payload: region input '", region.value(id).name, "' has no rank");
    }
  }
  for (auto& [node, why] : shape_refusals(region)) probe_refusals_.emplace(node, std::move(why));
  // The probe: the inputs at the core's probe dims, convolutions direct (nothing measured), constants
  // into the shared store (where the shapes run later find them).
  if (probe_input_dims.size() != region.inputs.size()) return;
  for (size_t i = 0; i < region.inputs.size(); ++i) {
    if (static_cast<int64_t>(probe_input_dims[i].size()) != region.value(region.inputs[i]).type.rank()) return;  // not worked out
  }
  try {
    Graph graph = specialize_shapes(region, probe_input_dims);
    AlgorithmMemo direct;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      direct[static_cast<int32_t>(i)] = static_cast<int32_t>(dnnl::algorithm::convolution_direct);
      direct[~static_cast<int32_t>(i)] = 0;  // a swish stays a post-op (lower_convolution's memo)
    }
    omp_set_num_threads(num_threads_);
    Program program = lower_region(graph, engine_, {}, &direct);
    bool convolutions = false, heavy = false;
    for (const Step& step : program.steps) {
      convolutions |= step.kind == StepKind::kConvolution;
      heavy |= step.kind == StepKind::kConvolution || step.kind == StepKind::kDeconvolution ||
               step.kind == StepKind::kMatMul || step.kind == StepKind::kInnerProduct || step.kind == StepKind::kPooling;
    }
    DnnlRegion probed(graph, std::move(program), engine_, num_threads_, &constants_, false);
    finite_only_ = probed.exact_only_for_finite_inputs() || convolutions;
    for (size_t i = 0; i < graph.nodes.size(); ++i) {
      std::string why = probed.node_refusal(i);
      if (!why.empty()) probe_refusals_[static_cast<int32_t>(i)] = why + " (open dims at " + std::to_string(kProbeDim) + ")";
    }
    // Only element-wise, normalisation and layout steps (a transformer's LayerNorm, Softmax and adds
    // between matmuls that run elsewhere): native runs them at any shape as fast, while this region
    // would lower them again for every new shape (BERT-like encoder at 237 sequence lengths, Zen 3:
    // 1.4 ms a new shape against 5 ms a call). Its nodes go to native.
    if (!heavy) {
      for (size_t i = 0; i < graph.nodes.size(); ++i) {
        probe_refusals_.emplace(static_cast<int32_t>(i),
                                "with open dims, a region of element-wise, normalisation and layout steps only: native "
                                "runs them at every shape without lowering them again for each one");
      }
    }
  } catch (const Error& e) {
    if (std::getenv("TESSERA_DNNL_TUNING_LOG")) std::fprintf(stderr, "dnnl open region: not probed: %s\n", e.what());
  } catch (const dnnl::error& e) {
    if (std::getenv("TESSERA_DNNL_TUNING_LOG")) std::fprintf(stderr, "dnnl open region: not probed: %s\n", e.what());
  }
}

std::string OpenDnnlRegion::node_refusal(size_t node) const {
  const auto found = probe_refusals_.find(static_cast<int32_t>(node));
  return found == probe_refusals_.end() ? "" : found->second;
}

OpenDnnlRegion::~OpenDnnlRegion() {
  for (const auto& [dims, spec] : cache_) g_cached_bytes -= spec->bytes;
}

std::shared_ptr<OpenDnnlRegion::Specialization> OpenDnnlRegion::specialize(const std::vector<Shape>& dims,
                                                                          bool full) const {
  auto spec = std::make_shared<Specialization>();
  spec->graph = specialize_shapes(region_, dims);  // dims that do not fit the graph: the user's error
  for (const Node& node : spec->graph.nodes) {
    // An empty value: oneDNN 2.6 has no use for one (its AVX-512 matmul divides by the row count: a
    // SIGFPE at batch 0), and a composite's members are not checked one by one below.
    for (const std::vector<ValueId>* values : {&node.inputs, &node.outputs}) {
      for (ValueId v : *values) {
        if (v == kNoValue) continue;
        const TensorType& type = spec->graph.value(v).type;
        if (type.rank_known && std::find(type.dims.begin(), type.dims.end(), 0) != type.dims.end()) {
          spec->refusal = node.describe() + ": '" + spec->graph.value(v).name + "' is empty";
          return spec;
        }
      }
    }
    if (node.domain == "tessera" && node.op_type == "Composite") continue;  // its pattern was matched on the graph
    const SupportDecision d = dnnl_declarations().supports(spec->graph, node);
    if (!d.supported) {
      spec->refusal = node.describe() + ": " + d.reason;
      return spec;
    }
  }
  try {
    omp_set_num_threads(num_threads_);  // layouts are chosen for the thread count runs use
    // The first shape measures the algorithms (into algorithms_) and is lowered in full; a later one
    // quickly unless `full`: its direct convolutions as kDirectJit (the memo's choices otherwise kept).
    AlgorithmMemo quick_memo;
    AlgorithmMemo* memo = &algorithms_;
    if (!full && !algorithms_.empty()) {
      quick_memo = algorithms_;
      for (auto& [key, algorithm] : quick_memo) {
        if (key >= 0 && algorithm == static_cast<int32_t>(dnnl::algorithm::convolution_direct)) {
          algorithm = kDirectJit;
          spec->quick = true;
        }
      }
      memo = &quick_memo;
    }
    Program program = lower_region(spec->graph, engine_, {}, memo);
    auto region = std::make_unique<DnnlRegion>(spec->graph, std::move(program), engine_, num_threads_, &constants_, false);
    for (size_t i = 0; i < spec->graph.nodes.size(); ++i) {
      const std::string why = region->node_refusal(i);
      if (!why.empty()) {
        spec->refusal = spec->graph.nodes[i].describe() + ": " + why;
        return spec;
      }
    }
    spec->bytes = region->footprint_bytes();
    spec->region = std::move(region);
  } catch (const Error& e) {
    spec->refusal = e.what();
  } catch (const dnnl::error& e) {
    spec->refusal = std::string("oneDNN: ") + e.what();
  }
  return spec;
}

std::shared_ptr<const OpenDnnlRegion::Specialization> OpenDnnlRegion::specialization(const std::vector<Shape>& dims,
                                                                                    bool* created, bool* tiered,
                                                                                    bool full) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = cache_.find(dims);
  if (found != cache_.end()) {
    recency_.splice(recency_.begin(), recency_, found->second->recency);
    *created = false;
    std::shared_ptr<Specialization>& spec = found->second;
    // A shape run again and again (a model used at one size, or a hot size of a trace) gets its full
    // lowering: a ResNet-18 at one size ran 12-20% slower on the quick one (Zen 5). A run still using
    // the quick one keeps it alive until it ends.
    if (spec->quick && spec->region && ++spec->calls >= kTierUpCalls) {
      std::shared_ptr<Specialization> full = specialize(dims, /*full=*/true);
      if (tiered) *tiered = true;
      if (full->region) {
        full->bytes = std::max<int64_t>(full->bytes, 4096);
        full->recency = spec->recency;
        g_cached_bytes += full->bytes - spec->bytes;
        spec = std::move(full);
      } else {
        spec->quick = false;  // (refused in full: the quick one stays)
      }
    }
    return spec;
  }
  std::shared_ptr<Specialization> spec = specialize(dims, full);
  if (!spec->region && std::getenv("TESSERA_DNNL_TUNING_LOG")) {
    std::fprintf(stderr, "dnnl open region: runs on native at these shapes: %s\n", spec->refusal.c_str());
  }
  spec->bytes = std::max<int64_t>(spec->bytes, 4096);  // a refusal still holds its graph
  recency_.push_front(dims);
  spec->recency = recency_.begin();
  cache_.emplace(dims, spec);
  g_cached_bytes += spec->bytes;
  // Over the process's bound: this region's least recently used out (a run still using one keeps it
  // alive until it ends).
  while (g_cached_bytes.load() > max_bytes_ && recency_.size() > 1) {
    auto victim = cache_.find(recency_.back());
    g_cached_bytes -= victim->second->bytes;
    cache_.erase(victim);
    recency_.pop_back();
  }
  *created = true;
  return spec;
}

bool OpenDnnlRegion::prepared_for(ValueStore& store) const {
  std::vector<Shape> dims;
  dims.reserve(region_.inputs.size());
  for (ValueId id : region_.inputs) dims.push_back(store.get(id).shape);
  std::lock_guard<std::mutex> lock(mutex_);
  return cache_.count(dims) != 0;
}

bool OpenDnnlRegion::try_run(ValueStore& store) const {
  std::vector<Shape> dims;
  dims.reserve(region_.inputs.size());
  for (ValueId id : region_.inputs) dims.push_back(store.get(id).shape);
  const auto start = std::chrono::steady_clock::now();
  bool created = false, tiered = false;
  std::shared_ptr<const Specialization> spec = specialization(dims, &created, &tiered, store.prepare_in_full());
  const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
  // (A lowering in full: a hit that prepared.)
  store.shapes_prepared(created, created || tiered ? elapsed.count() : 0.0, !spec->quick);
  if (!spec->region) return false;
  for (ValueId id : region_.outputs) {
    TensorView& out = store.output(id);
    const TensorType& type = spec->graph.value(id).type;
    if (!out.data) {
      out.dtype = type.dtype;
      out.shape = type.dims;
      store.allocate(id);
    } else if (out.shape != type.dims) {  // a caller's buffer (writes_into)
      throw_user_error("output '", spec->graph.value(id).name, "' is ", shape_to_string(type.dims),
                       " at these input shapes, but the buffer bound to it is ", shape_to_string(out.shape));
    }
  }
  const size_t needed = static_cast<size_t>(std::max<int64_t>(spec->region->workspace_bytes(), 64));
  // The run's pool where it has one: one buffer then serves this region and the others of the run.
  int32_t slot = -1;
  if (void* borrowed = store.borrow_workspace(needed, &slot)) {
    spec->region->run_in(store, borrowed);
    store.give_back_workspace(slot);
    return true;
  }
  // Else one workspace of this region's for every shape (grown to the largest), not one per cached shape.
  std::unique_ptr<Buffer> workspace;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!workspaces_.empty()) {
      workspace = std::move(workspaces_.back());
      workspaces_.pop_back();
    }
  }
  // Grown by half again, so that shapes growing a little at a time do not map fresh memory every call.
  if (!workspace || workspace->size() < needed) {
    workspace = std::make_unique<Buffer>(needed + needed / 2, false);
    store.allocated(workspace->size());
  }
  spec->region->run_in(store, workspace->data());
  std::lock_guard<std::mutex> lock(mutex_);
  workspaces_.push_back(std::move(workspace));
  return true;
}

void OpenDnnlRegion::run(ValueStore& store) const {
  if (try_run(store)) return;
  std::vector<Shape> dims;
  for (ValueId id : region_.inputs) dims.push_back(store.get(id).shape);
  bool created = false;
  throw_unsupported("oneDNN region at these input shapes: ", specialization(dims, &created)->refusal);
}

std::string OpenDnnlRegion::node_algorithm(size_t node) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto found = algorithms_.find(static_cast<int32_t>(node));
  const std::string note = found == algorithms_.end() ? "" : measured_algorithm_note(found->second);
  return note.empty() ? note : note + " at the first input shape run";
}

}  // namespace tessera::dnnl_backend
