// What a caller brings to a run besides the plan: its inputs, checked
// (validate_inputs: dtypes, shapes, named dims, bounds). Caller buffers (I/O
// binding): strided inputs handed to the regions that read them as they are,
// or as contiguous copies; output buffers written in place by the region that
// makes them where it can, or filled after the run; and the key/value caches a
// caller may keep in one buffer (CachePair). And dim bounds (--dim-bounds):
// checked per run, and the sizes of values at the upper bounds, which the
// run's pool allocates so that no later run within the bounds allocates.
//
// Contract: a region sees a strided view only where its executable said it
// reads one (ExecutableRegion::reads_strided) or writes one
// (writes_into); everything else sees contiguous memory, so no backend has to
// know about caller buffers. Every copy this costs is counted
// (RunCounts::binding_copies), so a caller can see that its binding works.
#include <algorithm>
#include <cstring>

#include "backends/native/native_backend.h"
#include "ir/error.h"
#include "ir/shape_util.h"
#include "passes/infer_and_fold.h"
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

/// A one-element view's value as text ("16000", "0.5", "true"), for messages.
std::string describe_scalar(const TensorView& v) {
  if (v.numel() != 1 || !v.data) return "a tensor of shape [" + shape_to_string(v.shape) + "]";
  switch (v.dtype) {
    case DType::kBool: return *static_cast<const uint8_t*>(v.data) ? "true" : "false";
    case DType::kFloat32: return str_cat(*static_cast<const float*>(v.data));
    case DType::kFloat64: return str_cat(*static_cast<const double*>(v.data));
    case DType::kFloat16: return str_cat(half_to_float(*static_cast<const uint16_t*>(v.data)));
    case DType::kBFloat16: return str_cat(bfloat16_to_float(*static_cast<const uint16_t*>(v.data)));
    case DType::kInt8: return str_cat(int{*static_cast<const int8_t*>(v.data)});
    case DType::kInt16: return str_cat(*static_cast<const int16_t*>(v.data));
    case DType::kInt32: return str_cat(*static_cast<const int32_t*>(v.data));
    case DType::kInt64: return str_cat(*static_cast<const int64_t*>(v.data));
    case DType::kUInt8: return str_cat(unsigned{*static_cast<const uint8_t*>(v.data)});
    case DType::kUInt16: return str_cat(*static_cast<const uint16_t*>(v.data));
    case DType::kUInt32: return str_cat(*static_cast<const uint32_t*>(v.data));
    case DType::kUInt64: return str_cat(*static_cast<const uint64_t*>(v.data));
    default: return "a value";
  }
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

void CompiledModel::apply_dim_bounds(const std::map<std::string, std::pair<int64_t, int64_t>>& bounds) {
  input_dim_bounds_.assign(inputs_.size(), {});
  bounded_bytes_.clear();
  if (bounds.empty()) return;
  for (const auto& [name, range] : bounds) {
    if (range.first < 0 || range.first > range.second) {
      throw_user_error("dim_bounds: '", name, "=", range.first, "..", range.second, "' is not a range of sizes MIN..MAX with 0 <= MIN <= MAX");
    }
  }
  // Open dims are checked at each run; a named dim fixed when the model was compiled (--input-shape, input
  // data) is checked now.
  std::vector<std::string> named;  // the model's dim names, for the message
  for (size_t i = 0; i < inputs_.size(); ++i) {
    input_dim_bounds_[i].assign(inputs_[i].shape.size(), {-1, -1});
    for (size_t d = 0; d < inputs_[i].dim_names.size() && d < inputs_[i].shape.size(); ++d) {
      const std::string& name = inputs_[i].dim_names[d];
      if (name.empty()) continue;
      if (std::find(named.begin(), named.end(), name) == named.end()) named.push_back(name);
      auto found = bounds.find(name);
      if (found == bounds.end()) continue;
      const auto [low, high] = found->second;
      const int64_t fixed = inputs_[i].shape[d];
      if (fixed < 0) {
        input_dim_bounds_[i][d] = found->second;
      } else if (fixed < low || fixed > high) {
        throw_user_error("input '", inputs_[i].name, "' dimension ", d, " ('", name, "') was fixed at ", fixed,
                         " when the model was compiled, outside its bounds ", low, "..", high, " (dim_bounds)");
      }
    }
  }
  for (const auto& [name, range] : bounds) {
    if (std::find(named.begin(), named.end(), name) == named.end()) {
      std::string names;
      for (const std::string& n : named) names += (names.empty() ? "" : ", ") + n;
      throw_user_error("dim_bounds: the model has no dimension named '", name, "' (its inputs' named dims: ",
                       names.empty() ? "none" : names, ")");
    }
  }
  // Every value's size at the upper bounds: the graph's types inferred again with each bounded input dim
  // at its upper bound (on a copy; dims left open keep what depends on them unknown).
  try {
    Graph at_bounds = graph_;
    for (size_t i = 0; i < inputs_.size(); ++i) {
      TensorType& t = at_bounds.value(at_bounds.inputs[i]).type;
      if (!t.is_tensor() || !t.rank_known) continue;
      for (size_t d = 0; d < t.dims.size() && d < input_dim_bounds_[i].size(); ++d) {
        if (input_dim_bounds_[i][d].first >= 0) t.dims[d] = input_dim_bounds_[i][d].second;
      }
    }
    infer_and_fold(at_bounds, evaluate_node_natively);
    bounded_bytes_.assign(graph_.values.size(), 0);
    for (size_t v = 0; v < at_bounds.values.size() && v < bounded_bytes_.size(); ++v) {
      const TensorType& t = at_bounds.values[v].type;
      if (!t.is_static() || !t.is_tensor() || t.dtype == DType::kString || !shape_fits_in_memory(t.dims, t.dtype)) continue;
      bounded_bytes_[v] = static_cast<size_t>(shape_numel(t.dims)) * dtype_size(t.dtype);
    }
  } catch (const Error&) {
    bounded_bytes_.clear();  // the bounds are still checked; memory grows as shapes come
  }
}

namespace {

/// Checks one tensor of a sequence or optional input against the declared element type.
void check_boxed_item(const ValueDesc& want, size_t index, const Tensor& item) {
  bool fits = item.dtype() == want.dtype || want.dtype == DType::kUndefined;
  if (fits && !want.shape.empty()) {
    fits = item.shape().size() == want.shape.size();
    for (size_t d = 0; fits && d < want.shape.size(); ++d) fits = want.shape[d] < 0 || want.shape[d] == item.shape()[d];
  }
  if (!fits) {
    throw_user_error("input '", want.name, "' (", value_kind_name(want.kind), "): tensor ", index, " is ",
                     dtype_name(item.dtype()), "[", shape_to_string(item.shape()), "], expected ", dtype_name(want.dtype),
                     want.shape.empty() ? std::string() : "[" + shape_to_string(want.shape) + "]");
  }
  if (!item.data() && item.numel() != 0) throw_user_error("input '", want.name, "': tensor ", index, " has no data");
}

}  // namespace

ModelStats CompiledModel::stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  return stats_;
}

void CompiledModel::validate_inputs(const std::vector<TensorView>& inputs, const BoxedIO* boxed) const {
  if (inputs.size() != inputs_.size()) {
    throw_user_error("the model has ", inputs_.size(), " inputs but ", inputs.size(), " were given");
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const ValueDesc& want = inputs_[i];
    if (want.kind != ValueKind::kTensor) {
      const BoxedValue* box = boxed && i < boxed->inputs.size() ? boxed->inputs[i] : nullptr;
      if (!box) {
        throw_user_error("input '", want.name, "' is ", value_kind_phrase(want.kind), ", but a tensor was given");
      }
      const bool want_sequence = want.kind == ValueKind::kSequence || want.kind == ValueKind::kOptionalSequence;
      const bool got_sequence = box->kind == ValueKind::kSequence || box->kind == ValueKind::kOptionalSequence;
      const bool want_optional = want.kind != ValueKind::kSequence;
      if (want_sequence != got_sequence || (!want_optional && box->kind != ValueKind::kSequence) ||
          (!box->present && !want_optional)) {
        throw_user_error("input '", want.name, "' is ", value_kind_phrase(want.kind), ", but ",
                         box->present ? "a " : "an empty ", value_kind_name(box->kind), " was given");
      }
      if (box->present && !got_sequence && box->items.size() != 1) {
        throw_user_error("input '", want.name, "': an optional tensor holds one tensor, got ", box->items.size());
      }
      if (!box->present && !box->items.empty()) throw_user_error("input '", want.name, "': an empty optional holds tensors");
      for (size_t k = 0; k < box->items.size(); ++k) check_boxed_item(want, k, box->items[k]);
      continue;
    }
    if (boxed && i < boxed->inputs.size() && boxed->inputs[i]) {
      throw_user_error("input '", want.name, "' is a tensor, but ", value_kind_phrase(boxed->inputs[i]->kind), " was given");
    }
    const TensorView& got = inputs[i];
    bool fits = got.dtype == want.dtype && got.shape.size() == want.shape.size();
    for (size_t d = 0; fits && d < got.shape.size(); ++d) fits = got.shape[d] >= 0 && (want.shape[d] < 0 || got.shape[d] == want.shape[d]);
    if (!fits) {
      throw_user_error("input '", want.name, "': expected ", dtype_name(want.dtype), "[", shape_to_string(want.shape),
                       "], got ", dtype_name(got.dtype), "[", shape_to_string(got.shape), "]");
    }
    check_tensor_size_lazy([&] { return "input '" + want.name + "'"; }, got.shape, got.dtype);
    for (size_t d = 0; d < input_dim_bounds_[i].size(); ++d) {
      const auto [low, high] = input_dim_bounds_[i][d];
      if (low >= 0 && (got.shape[d] < low || got.shape[d] > high)) {
        throw_user_error("input '", want.name, "' dimension ", d, " ('", want.dim_names[d], "') is ", got.shape[d],
                         ", outside its bounds ", low, "..", high, " (dim_bounds)");
      }
    }
    if (!got.data && got.numel() != 0) throw_user_error("input '", want.name, "' has no data");
  }
  // Inputs fixed at compile time: the caller must feed that value (the plan folded it in).
  for (const auto& [i, fixed] : fixed_input_values_) {
    const TensorView& got = inputs[i];
    if (got.numel() == 1 && std::memcmp(got.data, fixed.data(), dtype_size(fixed.dtype())) == 0) continue;
    throw_user_error("input '", inputs_[i].name, "' is ", describe_scalar(got), ", but the model was compiled with it fixed at ",
                     describe_scalar(fixed.view()), " (input_values): compile it without that value to feed others");
  }
  // Open dims that share a name (ONNX dim_param) take one value in a call.
  for (const std::vector<std::pair<size_t, size_t>>& group : named_open_dims_) {
    const auto [first, first_dim] = group.front();
    for (const auto& [i, d] : group) {
      if (inputs[i].shape[d] == inputs[first].shape[first_dim]) continue;
      const std::string& name = inputs_[i].dim_names[d];
      throw_user_error("input '", inputs_[i].name, "' dimension ", d, " ('", name, "') is ", inputs[i].shape[d],
                       ", but input '", inputs_[first].name, "' dimension ", first_dim, " ('", name, "') is ",
                       inputs[first].shape[first_dim], ": dims of one name must be equal");
    }
  }
}

void CompiledModel::bind_inputs(const std::vector<TensorView>& inputs, RunStore& store, std::vector<Tensor>& gathered) const {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs_[i].kind != ValueKind::kTensor) continue;
    const ValueId id = graph_.inputs[i];
    const TensorView& given = inputs[i];
    if (is_contiguous(given)) {
      store.bind_contiguous(id, given);
      continue;
    }
    if (is_padded_row_major(given.shape, given.strides) && every_region_reads(regions_, id, given)) {
      store.bind(id, given);
      continue;
    }
    if (gathered.empty()) gathered.reserve(inputs.size());  // (only where an input is copied)
    Tensor& copy = gathered.emplace_back(given.dtype, given.shape);
    copy_strided(copy.view(), given);
    store.bind(id, copy.view());
    count_copy(store.counts, given);
    ++store.counts.allocations;
  }
}

SmallVector<char, 16> CompiledModel::bind_outputs(const std::vector<TensorView*>& caller_outputs, RunStore& store) const {
  if (!caller_outputs.empty() && caller_outputs.size() != outputs_.size()) {
    throw_user_error("the model has ", outputs_.size(), " outputs but ", caller_outputs.size(), " output buffers were given");
  }
  SmallVector<char, 16> in_place(outputs_.size(), 0);
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
    if (contiguous) {
      store.bind_contiguous(id, *dest);
    } else {
      store.bind(id, *dest);
    }
    in_place[i] = 1;
  }
  return in_place;
}

void CompiledModel::fill_caller_outputs(const std::vector<TensorView*>& caller_outputs, const SmallVector<char, 16>& in_place,
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
