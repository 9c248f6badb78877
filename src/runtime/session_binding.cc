// Caller buffers of a run (I/O binding): strided inputs handed to the regions
// that read them as they are, or as contiguous copies; output buffers written
// in place by the region that makes them where it can, or filled after the
// run; and the key/value caches a caller may keep in one buffer (CachePair).
//
// Contract: a region sees a strided view only where its executable said it
// reads one (ExecutableRegion::reads_strided) or writes one
// (writes_into); everything else sees contiguous memory, so no backend has to
// know about caller buffers. Every copy this costs is counted
// (RunCounts::binding_copies), so a caller can see that its binding works.
#include <cstring>

#include "ir/error.h"
#include "ir/shape_util.h"
#include "runtime/region_plan.h"
#include "runtime/session.h"

namespace tessera {
namespace {

/// Where region `plan` has global value `id` among its inputs (or outputs): the index, or -1.
int64_t region_index_of(const std::vector<ValueId>& locals, const RegionPlan& plan, ValueId id) {
  for (size_t k = 0; k < locals.size(); ++k) {
    if (plan.region.global_value[static_cast<size_t>(locals[k])] == id) return static_cast<int64_t>(k);
  }
  return -1;
}

/// True when every region reading `id` takes `view` (strided) as it is.
bool every_region_reads(const std::vector<std::unique_ptr<RegionPlan>>& regions, ValueId id, const TensorView& view) {
  for (const auto& plan : regions) {
    const int64_t k = region_index_of(plan->region.graph.inputs, *plan, id);
    if (k < 0) continue;
    // Regions run elsewhere (device memory, the non-finite guard, native fallbacks at open shapes) read
    // their inputs through paths that take contiguous views only.
    if (plan->space || plan->guarded || plan->open_shapes || !plan->executable->reads_strided(static_cast<size_t>(k), view)) {
      return false;
    }
  }
  return true;
}

void count_copy(RunCounts& counts, const TensorView& view) {
  ++counts.binding_copies;
  counts.binding_copy_bytes += static_cast<int64_t>(view.nbytes());
}

}  // namespace

void CompiledModel::find_cache_pairs() {
  cache_pairs_.clear();
  for (size_t o = 0; o < graph_.outputs.size(); ++o) {
    const ValueId out = graph_.outputs[o];
    for (const Node& node : graph_.nodes) {
      if (node.op_type != "Concat" || !node.domain.empty() || node.outputs.empty() || node.outputs[0] != out ||
          node.inputs.empty()) {
        continue;
      }
      const Value& v = graph_.value(out);
      if (!v.type.is_tensor() || !v.type.rank_known) break;
      for (size_t i = 0; i < graph_.inputs.size(); ++i) {
        if (graph_.inputs[i] != node.inputs[0]) continue;
        const int64_t rank = static_cast<int64_t>(v.type.dims.size());
        cache_pairs_.push_back({i, o, normalize_axis(node.attrs.get_int_or("axis", 1), rank)});
      }
      break;
    }
  }
}

void CompiledModel::bind_inputs(const std::vector<TensorView>& inputs, RunStore& store, std::vector<Tensor>& gathered) const {
  gathered.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs_[i].kind != ValueKind::kTensor) continue;
    const ValueId id = graph_.inputs[i];
    const TensorView& given = inputs[i];
    if (is_contiguous(given)) {
      TensorView view = given;
      view.strides.clear();
      store.bind(id, view);
      continue;
    }
    if (is_padded_row_major(given.shape, given.strides) && every_region_reads(regions_, id, given)) {
      store.bind(id, given);
      continue;
    }
    Tensor& copy = gathered.emplace_back(given.dtype, given.shape);
    copy_strided(copy.view(), given);
    store.bind(id, copy.view());
    count_copy(store.counts, given);
    ++store.counts.allocations;
  }
}

std::vector<char> CompiledModel::bind_outputs(const std::vector<TensorView*>& caller_outputs, RunStore& store) const {
  if (!caller_outputs.empty() && caller_outputs.size() != outputs_.size()) {
    throw_user_error("the model has ", outputs_.size(), " outputs but ", caller_outputs.size(), " output buffers were given");
  }
  std::vector<char> in_place(outputs_.size(), 0);
  for (size_t i = 0; i < caller_outputs.size(); ++i) {
    TensorView* dest = caller_outputs[i];
    if (!dest) continue;
    const ValueDesc& want = outputs_[i];
    if (want.dtype == DType::kString) {
      throw_user_error("output '", want.name, "' is a string tensor, which is returned, not written into a caller buffer");
    }
    bool fits = dest->dtype == want.dtype && dest->shape.size() == want.shape.size();
    for (size_t d = 0; fits && d < want.shape.size(); ++d) fits = want.shape[d] < 0 || dest->shape[d] == want.shape[d];
    if (!fits) {
      throw_user_error("output '", want.name, "': buffer is ", dtype_name(dest->dtype), "[", shape_to_string(dest->shape),
                       "], the model produces ", dtype_name(want.dtype), "[", shape_to_string(want.shape), "]");
    }
    if (dest->strided() && !is_padded_row_major(dest->shape, dest->strides)) {
      throw_user_error("output '", want.name, "': its strides (", shape_to_string(dest->strides),
                       ") do not lay it out row-major in a larger buffer: the last dimension must have stride 1 and "
                       "each other one a stride at least the span of the dimensions after it");
    }
    if (!dest->data && dest->numel() != 0) throw_user_error("output '", want.name, "': the buffer's data is NULL");
    const ValueId id = graph_.outputs[i];
    bool computed = !graph_.is_constant(id);
    for (ValueId in : graph_.inputs) computed &= in != id;
    for (size_t j = 0; j < i; ++j) computed &= graph_.outputs[j] != id;
    if (!computed) continue;
    const bool contiguous = is_contiguous(*dest);
    bool bind = contiguous && dest->shape == want.shape;  // static: every backend writes it in place
    if (!bind) {
      for (const auto& plan : regions_) {
        const int64_t k = region_index_of(plan->region.graph.outputs, *plan, id);
        if (k < 0) continue;
        // A region that may run on native instead (FallbackRegionStore) copies into the buffer then.
        bind = !plan->space && (contiguous || (!plan->guarded && !plan->open_shapes)) &&
               plan->executable->writes_into(static_cast<size_t>(k), *dest);
        break;
      }
      if (bind && !contiguous) bind = every_region_reads(regions_, id, *dest);
    }
    if (!bind) continue;
    TensorView view = *dest;
    if (contiguous) view.strides.clear();
    store.bind(id, view);
    in_place[i] = 1;
  }
  return in_place;
}

void CompiledModel::fill_caller_outputs(const std::vector<TensorView*>& caller_outputs, const std::vector<char>& in_place,
                                        RunStore& store) const {
  for (size_t i = 0; i < caller_outputs.size(); ++i) {
    TensorView* dest = caller_outputs[i];
    if (!dest) continue;
    const TensorView& made = store.get(graph_.outputs[i]);
    if (in_place[i] && made.data == dest->data) continue;  // written there
    if (made.shape != dest->shape) {
      throw_user_error("output '", outputs_[i].name, "' is ", shape_to_string(made.shape),
                       " at these inputs, but the buffer given for it is ", shape_to_string(dest->shape));
    }
    if (made.nbytes() == 0) continue;
    copy_view_data(*dest, made);
    count_copy(store.counts, made);
  }
}

}  // namespace tessera
