// Per-run value stores and the execution of one region, with the copies
// between memory spaces that the plan calls for (see region_plan.h).
#include <algorithm>
#include <chrono>
#include <cstring>

#include "ir/error.h"
#include "ir/shape_util.h"
#include "runtime/finite_scan.h"
#include "runtime/region_plan.h"

namespace tessera {

RunStore::RunStore(const Graph& graph, const MemoryPlan& plan, Buffer& arena, bool poison, BufferPool* pool,
                   const std::vector<size_t>* bounded_bytes)
    : RunStore(graph) {
  begin(plan, arena, poison, pool, bounded_bytes);
}

RunStore::RunStore(const Graph& graph)
    : graph_(graph), views_(graph.values.size()), owned_(graph.values.size()), poison_(false),
      is_output_(graph.values.size(), 0), arena_begin_(nullptr), arena_end_(nullptr), pool_(nullptr),
      bounded_bytes_(nullptr), buffer_of_(graph.values.size(), -1) {
  for (ValueId id : graph.outputs) is_output_[static_cast<size_t>(id)] = 1;
}

void RunStore::begin(const MemoryPlan& plan, Buffer& arena, bool poison, BufferPool* pool,
                     const std::vector<size_t>* bounded_bytes) {
  if (running_) end();
  running_ = true;
  poison_ = poison;
  arena_begin_ = static_cast<const char*>(arena.data());
  arena_end_ = arena_begin_ + arena.size();
  pool_ = pool;
  bounded_bytes_ = bounded_bytes;
  counts = RunCounts{};
  held_bytes_ = peak_bytes_ = 0;
  auto* base = static_cast<char*>(arena.data());
  if (poison) std::memset(base, 0xFF, arena.size());
  // (Assignments keep each view's shape capacity: a store used again allocates nothing here.)
  for (size_t i = 0; i < graph_.values.size(); ++i) {
    const Value& v = graph_.values[i];
    TensorView& view = views_[i];
    if (v.constant) {
      const Tensor& c = *v.constant;
      view.dtype = c.dtype();
      view.shape = c.shape();
      view.data = c.data();
      view.strides.clear();
    } else {
      view.dtype = v.type.is_static() ? v.type.dtype : DType::kUndefined;
      if (v.type.is_static()) {
        view.shape = v.type.dims;
      } else {
        view.shape.clear();
      }
      view.strides.clear();
      view.data = v.type.is_static() && plan.offsets[i] != MemoryPlan::kNotPlanned ? base + plan.offsets[i] : nullptr;
    }
  }
}

TensorView& RunStore::output(ValueId id) {
  TensorView& v = views_[static_cast<size_t>(id)];
  if (!v.data && graph_.value(id).type.is_static()) allocate(id);
  return v;
}

RunStore::~RunStore() {
  if (running_) end();
}

void RunStore::end() {
  running_ = false;
  for (Tensor& t : owned_) {
    if (t.defined()) t = Tensor();
  }
  boxed_.clear();
  std::fill(buffer_of_.begin(), buffer_of_.end(), -1);
  buffer_refs_.clear();
  if (!pool_) {
    borrowed_.clear();
    return;
  }
  std::vector<std::unique_ptr<Buffer>>& free = pool_->buffers;
  size_t held = 0, count = 0;
  for (std::unique_ptr<Buffer>& b : borrowed_) {
    if (!b) continue;
    free.push_back(std::move(b));
    ++count;
  }
  borrowed_.clear();
  for (const std::unique_ptr<Buffer>& b : free) held += b->size();
  // Kept within twice the most any run held at once: buffers beyond, left over from other shapes, go
  // smallest first.
  pool_->high_water = std::max(pool_->high_water, peak_bytes_);
  std::sort(free.begin(), free.end(), [](const auto& a, const auto& b) { return a->size() > b->size(); });
  while (held > 2 * pool_->high_water && free.size() > count) {
    held -= free.back()->size();
    free.pop_back();
  }
}

void RunStore::allocate(ValueId id) {
  TensorView& v = views_[static_cast<size_t>(id)];
  if (pool_ && v.dtype != DType::kString && !is_output_[static_cast<size_t>(id)]) {
    check_tensor_size_lazy([&] { return "value '" + graph_.value(id).name + "'"; }, v.shape, v.dtype);
    // At least the value's size at its dims' upper bounds, where bounds give one: every run then asks for
    // the same sizes, and the buffers of the first serve all later ones.
    const size_t bytes = std::max(v.nbytes(), bounded_bytes_ ? (*bounded_bytes_)[static_cast<size_t>(id)] : size_t{0});
    // Room for a larger shape next time (none needed at the bounds' size).
    const bool bounded = bounded_bytes_ && (*bounded_bytes_)[static_cast<size_t>(id)] >= bytes;
    // (The view alone points at the pool's buffer, without a tensor: a value that is not a graph output
    // is never taken.)
    release(id);  // (a value allocated again: its earlier buffer goes back)
    buffer_of_[static_cast<size_t>(id)] = borrow(bytes, !bounded, &v.data);
    if (poison_) std::memset(v.data, 0xFF, v.nbytes());
    return;
  } else {
    // Not zero-filled: every kernel writes all of its outputs (TESSERA_POISON runs check that), and a
    // prompt's logits are megabytes.
    owned_[static_cast<size_t>(id)] = Tensor::uninitialized(v.dtype, v.shape);
    // Working memory only: a graph output is the caller's result (bind a buffer to avoid it).
    if (!is_output_[static_cast<size_t>(id)]) ++counts.allocations;
  }
  v.data = owned_[static_cast<size_t>(id)].data();
  if (poison_ && v.dtype != DType::kString) std::memset(v.data, 0xFF, owned_[static_cast<size_t>(id)].nbytes());
}

int32_t RunStore::borrow(size_t bytes, bool room_to_grow, void** data) {
  // The smallest free buffer that is large enough, else a new one (its memory is kept for later runs).
  std::vector<std::unique_ptr<Buffer>>& free = pool_->buffers;
  size_t best = free.size();
  for (size_t i = 0; i < free.size(); ++i) {
    if (free[i]->size() >= bytes && (best == free.size() || free[i]->size() < free[best]->size())) best = i;
  }
  std::unique_ptr<Buffer> buffer;
  if (best < free.size()) {
    buffer = std::move(free[best]);
    free.erase(free.begin() + static_cast<std::ptrdiff_t>(best));
  } else {
    buffer = std::make_unique<Buffer>(std::max<size_t>(room_to_grow ? bytes + bytes / 4 : bytes, 64), false);
    ++counts.allocations;
  }
  held_bytes_ += buffer->size();
  peak_bytes_ = std::max(peak_bytes_, held_bytes_);
  buffer_refs_.push_back(1);
  *data = buffer->data();
  borrowed_.push_back(std::move(buffer));
  return static_cast<int32_t>(borrowed_.size() - 1);
}

void RunStore::give_back(int32_t slot) {
  if (--buffer_refs_[static_cast<size_t>(slot)] > 0) return;
  std::unique_ptr<Buffer>& buffer = borrowed_[static_cast<size_t>(slot)];
  held_bytes_ -= buffer->size();
  if (poison_) std::memset(buffer->data(), 0xFF, buffer->size());  // a read after release shows
  pool_->buffers.push_back(std::move(buffer));
}

bool RunStore::alias(ValueId output, ValueId input) {
  TensorView& out = views_[static_cast<size_t>(output)];
  const TensorView& in = views_[static_cast<size_t>(input)];
  const auto* bytes = static_cast<const char*>(in.data);
  if (out.data || is_output_[static_cast<size_t>(output)] || !bytes || in.dtype != out.dtype ||
      in.dtype == DType::kString || in.nbytes() != out.nbytes() || (bytes >= arena_begin_ && bytes < arena_end_)) {
    return false;
  }
  out.data = in.data;
  const int32_t slot = buffer_of_[static_cast<size_t>(input)];
  if (slot >= 0) {
    buffer_of_[static_cast<size_t>(output)] = slot;
    ++buffer_refs_[static_cast<size_t>(slot)];
  }
  return true;
}

void RunStore::release(ValueId id) {
  const int32_t slot = buffer_of_[static_cast<size_t>(id)];
  if (slot < 0) return;
  buffer_of_[static_cast<size_t>(id)] = -1;
  give_back(slot);
}

Tensor RunStore::take(ValueId id) {
  const TensorView& v = views_[static_cast<size_t>(id)];
  Tensor& t = owned_[static_cast<size_t>(id)];
  if (t.defined() && t.data() == v.data && t.shape() == v.shape) return t;
  return Tensor::from_view(v);
}

ResidentValues::~ResidentValues() {
  for (Entry& e : entries_) e.space->deallocate(e.view.data);
}

void ResidentValues::put(ValueId id, MemorySpace* space, const TensorView& view) {
  entries_.push_back({id, space, view});
}

const TensorView* ResidentValues::find(ValueId id, const MemorySpace* space) const {
  for (const Entry& e : entries_) {
    if (e.id == id && e.space == space) return &e.view;
  }
  return nullptr;
}

DetachedRegionStore::DetachedRegionStore(const Graph& graph)
    : graph_(graph), views_(graph.values.size()), owned_(graph.values.size()) {
  for (size_t i = 0; i < graph.values.size(); ++i) {
    const Value& v = graph.values[i];
    if (v.constant) {
      views_[i] = v.constant->view();
    } else {
      views_[i].dtype = v.type.dtype;
      if (v.type.is_static()) views_[i].shape = v.type.dims;
    }
  }
}

TensorView& DetachedRegionStore::output(ValueId id) {
  TensorView& v = views_[static_cast<size_t>(id)];
  if (!v.data && graph_.value(id).type.is_static()) allocate(id);
  return v;
}

void DetachedRegionStore::allocate(ValueId id) {
  TensorView& v = views_[static_cast<size_t>(id)];
  owned_[static_cast<size_t>(id)] = Tensor(v.dtype, v.shape);
  v.data = owned_[static_cast<size_t>(id)].data();
}

namespace {

/// Reports a region node's time on the global node the placement lists it under.
void add_node_time(RunProfile* profile, const RegionPlan& plan, size_t node_index, double milliseconds) {
  if (profile && node_index < plan.anchor_node.size()) profile->node_milliseconds[plan.anchor_node[node_index]] += milliseconds;
}

/// Adds the times of the nodes inside placement row `row`'s bodies.
void add_inner_times(RunProfile* profile, size_t row, const std::vector<double>& milliseconds) {
  if (!profile) return;
  if (profile->inner_node_milliseconds.size() <= row) profile->inner_node_milliseconds.resize(row + 1);
  std::vector<double>& times = profile->inner_node_milliseconds[row];
  if (times.size() < milliseconds.size()) times.resize(milliseconds.size(), 0.0);
  for (size_t k = 0; k < milliseconds.size(); ++k) times[k] += milliseconds[k];
}

/// A host region reads and writes the run's values in place.
class HostRegionStore : public ValueStore {
 public:
  HostRegionStore(const RegionPlan& plan, RunStore& store, RunProfile* profile)
      : plan_(plan), store_(store), profile_(profile) {}
  const TensorView& get(ValueId id) override { return store_.get(global(id)); }
  TensorView& output(ValueId id) override { return store_.output(global(id)); }
  void allocate(ValueId id) override { store_.allocate(global(id)); }
  bool alias(ValueId output, ValueId input) override { return store_.alias(global(output), global(input)); }
  void release(ValueId id) override { store_.release(global(id)); }
  BoxedValue& boxed(ValueId id) override { return store_.boxed(global(id)); }
  bool profiling() const override { return profile_ != nullptr && profile_->time_nodes; }
  void node_finished(size_t node_index, double milliseconds) override {
    add_node_time(profile_, plan_, node_index, milliseconds);
  }
  void inner_nodes_finished(size_t node_index, const std::vector<double>& milliseconds) override {
    if (node_index < plan_.anchor_node.size()) add_inner_times(profile_, plan_.anchor_node[node_index], milliseconds);
  }
  void made_non_finite() override { made_non_finite_ = true; }
  void shapes_prepared(bool created, double milliseconds, bool full) override {
    ++(created ? store_.counts.shape_cache_misses : store_.counts.shape_cache_hits);
    store_.counts.shape_prepare_milliseconds += milliseconds;
    prepare_milliseconds_ += milliseconds;
    prepared_full_ = full;
  }
  bool prepare_in_full() const override { return prepare_in_full_; }
  /// What shapes_prepared reported preparing during this store's run, and whether in full.
  double prepare_milliseconds() const { return prepare_milliseconds_; }
  bool prepared_full() const { return prepared_full_; }
  void ask_to_prepare_in_full() { prepare_in_full_ = true; }
  void allocated(size_t) override { ++store_.counts.allocations; }
  void* borrow_workspace(size_t bytes, int32_t* slot) override {
    if (!store_.has_pool()) return nullptr;
    void* data = nullptr;
    *slot = store_.borrow(bytes, /*room_to_grow=*/true, &data);
    return data;
  }
  void give_back_workspace(int32_t slot) override { store_.give_back(slot); }
  /// True when the region reported a NaN or ±Inf made inside it.
  bool needs_exact_rerun() const { return made_non_finite_; }

 private:
  ValueId global(ValueId local) const { return plan_.region.global_value[static_cast<size_t>(local)]; }
  const RegionPlan& plan_;
  RunStore& store_;
  RunProfile* profile_;
  bool made_non_finite_ = false;
  double prepare_milliseconds_ = 0;
  bool prepared_full_ = true;  // (a region that reports nothing has one tier)
  bool prepare_in_full_ = false;
};

/// A device region's values: inputs copied into its space (or found
/// resident), everything it computes allocated in its space.
class DeviceRegionStore : public ValueStore {
 public:
  DeviceRegionStore(const RegionPlan& plan, RunStore& store, ResidentValues& resident, RunProfile* profile,
                    bool standalone)
      : plan_(plan), space_(*plan.space), store_(store), resident_(resident), profile_(profile),
        standalone_(standalone), views_(plan.region.graph.values.size()), owned_(plan.region.graph.values.size(), 0) {
    const Graph& g = plan.region.graph;
    for (size_t i = 0; i < g.values.size(); ++i) {
      const Value& v = g.values[i];
      if (v.constant) {
        views_[i] = v.constant->view();  // host constants: the backend keeps its own device copies
      } else {
        views_[i].dtype = v.type.dtype;
        if (v.type.is_static()) views_[i].shape = v.type.dims;
      }
    }
    for (size_t k = 0; k < g.inputs.size(); ++k) {
      const ValueId local = g.inputs[k];
      const ValueId global = plan.region.global_value[static_cast<size_t>(local)];
      if (plan.input_resident[k] && !standalone) {
        const TensorView* on_device = resident.find(global, plan.space);
        if (!on_device) throw_internal_error("region input '", g.value(local).name, "' is not resident in ", space_.name());
        views_[static_cast<size_t>(local)] = *on_device;
        continue;
      }
      const TensorView& host = store.get(global);
      TensorView& device = views_[static_cast<size_t>(local)];
      device.dtype = host.dtype;
      device.shape = host.shape;
      allocate(local);
      space_.copy_from_host(device.data, host.data, host.nbytes());
      count_copy(host.nbytes());
      if (plan.input_keep[k] && !standalone) {
        resident.put(global, plan.space, device);
        owned_[static_cast<size_t>(local)] = 0;
      }
    }
  }

  ~DeviceRegionStore() override {
    for (size_t i = 0; i < views_.size(); ++i) {
      if (owned_[i]) space_.deallocate(views_[i].data);
    }
  }

  const TensorView& get(ValueId id) override { return views_[static_cast<size_t>(id)]; }
  TensorView& output(ValueId id) override {
    TensorView& v = views_[static_cast<size_t>(id)];
    if (!v.data && plan_.region.graph.value(id).type.is_static()) allocate(id);
    return v;
  }
  void allocate(ValueId id) override {
    TensorView& v = views_[static_cast<size_t>(id)];
    if (owned_[static_cast<size_t>(id)]) space_.deallocate(v.data);
    v.data = space_.allocate(v.nbytes());
    owned_[static_cast<size_t>(id)] = 1;
  }
  bool profiling() const override { return profile_ != nullptr && profile_->time_nodes; }
  void node_finished(size_t node_index, double milliseconds) override {
    add_node_time(profile_, plan_, node_index, milliseconds);
  }
  void inner_nodes_finished(size_t node_index, const std::vector<double>& milliseconds) override {
    if (node_index < plan_.anchor_node.size()) add_inner_times(profile_, plan_.anchor_node[node_index], milliseconds);
  }

  /// Copies outputs to the host where needed and hands resident ones over.
  void finish() {
    const Graph& g = plan_.region.graph;
    for (size_t k = 0; k < g.outputs.size(); ++k) {
      const size_t local = static_cast<size_t>(g.outputs[k]);
      const ValueId global = plan_.region.global_value[local];
      const TensorView& device = views_[local];
      if (!device.data && device.numel() != 0) {
        throw_internal_error("backend '", plan_.backend->name(), "' did not write region output '", g.values[local].name, "'");
      }
      if (plan_.output_to_host[k] || standalone_) {
        TensorView& host = store_.output(global);
        if (!host.data) {
          host.dtype = device.dtype;
          host.shape = device.shape;
          store_.allocate(global);
        }
        if (host.nbytes() != device.nbytes()) throw_internal_error("region output '", g.values[local].name, "' changed size");
        space_.copy_to_host(host.data, device.data, device.nbytes());
        count_copy(device.nbytes());
      }
      if (plan_.output_resident[k] && !standalone_ && owned_[local]) {
        resident_.put(global, plan_.space, device);
        owned_[local] = 0;
      }
    }
    // Copies into the space may still be queued; the host buffers they read
    // (arena slots) are reused by later regions.
    space_.synchronize();
  }

 private:
  void count_copy(size_t bytes) {
    if (!profile_) return;
    ++profile_->copies;
    profile_->copy_bytes += static_cast<int64_t>(bytes);
  }

  const RegionPlan& plan_;
  MemorySpace& space_;
  RunStore& store_;
  ResidentValues& resident_;
  RunProfile* profile_;
  bool standalone_;
  std::vector<TensorView> views_;
  std::vector<char> owned_;
};

/// A guarded region run on native (fallback_region): its inputs are read from
/// the run's values, everything it computes lives in tensors of its own (the
/// memory plan's offsets follow the original region's steps, not native's
/// node by node order), and its outputs are copied into the run's values.
class FallbackRegionStore : public DetachedRegionStore {
 public:
  FallbackRegionStore(const RegionPlan& plan, RunStore& store, RunProfile* profile)
      : DetachedRegionStore(plan.fallback_region.graph), plan_(plan), store_(store), profile_(profile),
        slots_(plan.fallback_region.graph.values.size(), -1), is_output_(plan.fallback_region.graph.values.size(), 0) {
    for (ValueId local : graph_.inputs) bind(local, store.get(global(local)));
    for (ValueId local : graph_.outputs) is_output_[static_cast<size_t>(local)] = 1;
    // (A region input that is also an output keeps its input view: finish() copies it.)
    for (ValueId local : graph_.inputs) is_output_[static_cast<size_t>(local)] = 0;
  }
  ~FallbackRegionStore() override {
    for (int32_t slot : slots_) {
      if (slot >= 0) store_.give_back(slot);
    }
  }
  /// A region output: straight in the run's value where that is a plain buffer of its shape (nothing to
  /// copy after; a BERT-sized encoder's deferred calls copied 4-5 region outputs of 100-400 KB each).
  /// With the run's pool (open dims): other values in its buffers, given back when the region's nodes
  /// release them (a region run on native call after call at new shapes maps no fresh memory each time).
  void allocate(ValueId id) override {
    TensorView& v = views_[static_cast<size_t>(id)];
    if (is_output_[static_cast<size_t>(id)] && v.dtype != DType::kString) {
      TensorView& target = store_.output(global(id));
      if (!target.data) {
        target.dtype = v.dtype;
        target.shape = v.shape;
        store_.allocate(global(id));
      }
      if (target.data && !target.strided() && target.dtype == v.dtype && target.shape == v.shape) {
        v.data = target.data;
        return;
      }
    }
    if (!store_.has_pool() || v.dtype == DType::kString) return DetachedRegionStore::allocate(id);
    release(id);
    slots_[static_cast<size_t>(id)] = store_.borrow(std::max<size_t>(v.nbytes(), 1), true, &v.data);
  }
  void release(ValueId id) override {
    int32_t& slot = slots_[static_cast<size_t>(id)];
    if (slot >= 0) store_.give_back(slot);
    slot = -1;
  }
  bool profiling() const override { return profile_ != nullptr && profile_->time_nodes; }
  void node_finished(size_t node_index, double milliseconds) override {
    if (profile_ && node_index < graph_.nodes.size()) {
      profile_->node_milliseconds[plan_.fallback_region.global_nodes[node_index].front()] += milliseconds;
    }
  }
  void inner_nodes_finished(size_t node_index, const std::vector<double>& milliseconds) override {
    if (node_index < plan_.fallback_region.global_nodes.size() && !plan_.fallback_region.global_nodes[node_index].empty()) {
      add_inner_times(profile_, plan_.fallback_region.global_nodes[node_index].front(), milliseconds);
    }
  }
  /// Copies the region's outputs into the run's values.
  void finish() {
    for (ValueId local : graph_.outputs) {
      const TensorView& made = views_[static_cast<size_t>(local)];
      if (!made.data && made.numel() != 0) {
        throw_internal_error("native did not write region output '", graph_.value(local).name, "'");
      }
      TensorView& target = store_.output(global(local));
      if (!target.data) {
        target.dtype = made.dtype;
        target.shape = made.shape;
        store_.allocate(global(local));
      }
      if (target.shape != made.shape) {  // a caller's buffer (ExecutableRegion::writes_into)
        throw_user_error("output '", graph_.value(local).name, "' is ", shape_to_string(made.shape),
                         " at these input shapes, but the buffer bound to it is ", shape_to_string(target.shape));
      }
      if (made.data == target.data && !made.strided()) continue;  // written in place (allocate)
      copy_view_data(target, made);
    }
  }

 private:
  ValueId global(ValueId local) const { return plan_.fallback_region.global_value[static_cast<size_t>(local)]; }
  const RegionPlan& plan_;
  RunStore& store_;
  RunProfile* profile_;
  std::vector<int32_t> slots_;  // per local value: its buffer's slot in the run's pool, or -1
  std::vector<char> is_output_;  // per local value: a region output made inside the region
};

/// True when every floating-point input of the region is finite.
bool inputs_finite(const RegionPlan& plan, RunStore& store) {
  for (ValueId local : plan.region.graph.inputs) {
    if (!all_finite(store.get(plan.region.global_value[static_cast<size_t>(local)]))) return false;
  }
  return true;
}

/// Runs a guarded region's (or open-shaped region's) nodes on native, compiling them on first need
/// (once, whichever thread gets there first).
void run_on_native(const RegionPlan& plan, RunStore& store, RunProfile* profile) {
  if (compile_fallback(plan)) ++store.counts.fallback_compiles;
  FallbackRegionStore region_store(plan, store, profile);
  plan.fallback->run(region_store);
  region_store.finish();
}

/// A region with open dims: at shapes its executable has prepared, try_run; at others, the admission
/// chooses between preparing them (try_run) and native for this call, from what each measured before.
/// False when the executable cannot run at these shapes (run_region then runs its nodes on native).
bool run_open_region(const RegionPlan& plan, HostRegionStore& region_store, RunStore& store, RunProfile* profile) {
  if (plan.executable->prepared_for(region_store)) {
    const bool ran = plan.executable->try_run(region_store);
    // (A quick tier's shape moved up to the full one on the way: what that cost, without reading the clock.)
    if (region_store.prepare_milliseconds() > 0) plan.admission.tiered_up(region_store.prepare_milliseconds());
    return ran;
  }
  std::vector<Shape> dims;
  int64_t work = 0;
  for (ValueId local : plan.region.graph.inputs) {
    const TensorView& view = region_store.get(local);
    dims.push_back(view.shape);
    work += view.numel();
  }
  using Clock = std::chrono::steady_clock;
  const ShapeAdmission::Choice choice = plan.admission.choose(dims, work);
  if (choice == ShapeAdmission::Choice::kNative) {
    if (compile_fallback(plan)) ++store.counts.fallback_compiles;  // not in the time measured
    const auto start = Clock::now();
    run_on_native(plan, store, profile);
    plan.admission.ran_native(work, std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    ++store.counts.shape_deferrals;
    return true;
  }
  if (choice == ShapeAdmission::Choice::kPrepareFull) region_store.ask_to_prepare_in_full();
  const auto start = Clock::now();
  const bool ran = plan.executable->try_run(region_store);
  const double total = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  const double prepare_ms = region_store.prepare_milliseconds();
  if (ran) {
    plan.admission.prepared(work, choice,
                            region_store.prepared_full() ? ShapeAdmission::Tier::kFull : ShapeAdmission::Tier::kQuick,
                            prepare_ms, total - prepare_ms);
  }
  return ran;
}

}  // namespace

bool compile_fallback(const RegionPlan& plan) {
  bool compiled = false;
  std::call_once(plan.fallback_compiled, [&] {
    plan.fallback = plan.fallback_backend->compile(plan.fallback_region.graph, plan.fallback_options).executable;
    compiled = true;
  });
  return compiled;
}

void run_region(const RegionPlan& plan, RunStore& store, ResidentValues& resident, RunProfile* profile,
                size_t region_index, bool standalone) {
  // (Clock reads only when profiling: on a VM a read can cost a good part of a small region's run.)
  const auto start = profile ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (plan.guarded && (plan.constants_not_finite || !inputs_finite(plan, store))) {
    run_on_native(plan, store, profile);
    if (profile) ++profile->region_fallbacks[region_index];
  } else if (!plan.space) {
    HostRegionStore region_store(plan, store, profile);
    bool ran = true;
    if (plan.open_shapes) {
      ran = run_open_region(plan, region_store, store, profile);
    } else {
      plan.executable->run(region_store);
    }
    if (!ran) {
      // Open dims at which the backend cannot run the region: its nodes run on native this call.
      run_on_native(plan, store, profile);
      ++store.counts.shape_fallbacks;
    } else if (plan.guarded && region_store.needs_exact_rerun()) {
      // A NaN or ±Inf made inside the region may have been dropped by a later
      // step: the same inputs (kept intact by the memory plan) run on native.
      run_on_native(plan, store, profile);
      if (profile) ++profile->region_fallbacks[region_index];
    }
  } else {
    DeviceRegionStore region_store(plan, store, resident, profile, standalone);
    plan.executable->run(region_store);
    region_store.finish();
  }
  if (profile) {
    std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
    profile->region_milliseconds[region_index] += elapsed.count();
  }
}

}  // namespace tessera
