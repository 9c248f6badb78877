// One oneDNN primitive for equal descriptors, shared by every region that creates it.
//
// Creating a primitive JITs its kernels (about 0.3-2 ms each for a decoder's products). oneDNN's own
// primitive cache would let a model's twelve equal layers, or a second session of a model, create each
// once, but Tessera keeps it off: in oneDNN 2.6 it corrupts the heap as it evicts entries (see
// dnnl_backend.cc). This is the part of it Tessera needs, with its own bounded map: the key is what
// decides the primitive (its kind, its operation descriptor as oneDNN stores it, the implementation
// chosen, every memory descriptor it executes with, its attributes as the descriptor reports them, and
// OpenMP's thread count at creation, which JIT kernels are specialised for), and a hit returns another
// handle to the same primitive. oneDNN primitives are immutable once created and Tessera's use a
// scratchpad the caller passes (scratchpad_mode::user), so regions may run one at once from several
// threads. Eviction drops the map's handle only; a region keeps its own for as long as it lives.
// Descriptors this does not know how to key (reorders, concatenations) are created as before.
#include <omp.h>

#include <cstring>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "backends/dnnl/dnnl_internal.h"

namespace tessera::dnnl_backend {
namespace {

/// Entries kept (a GPT-2-sized decoder's prompt shape needs about 60; each holds its JIT code, tens of KB).
constexpr size_t kSharedPrimitives = 256;

/// The size of the operation descriptor oneDNN keeps for a primitive of `kind`; 0 where not keyed.
size_t op_desc_size(dnnl_primitive_kind_t kind) {
  switch (kind) {
    case dnnl_convolution: return sizeof(dnnl_convolution_desc_t);
    case dnnl_deconvolution: return sizeof(dnnl_deconvolution_desc_t);
    case dnnl_matmul: return sizeof(dnnl_matmul_desc_t);
    case dnnl_eltwise: return sizeof(dnnl_eltwise_desc_t);
    case dnnl_binary: return sizeof(dnnl_binary_desc_t);
    case dnnl_pooling_v2: return sizeof(dnnl_pooling_v2_desc_t);
    case dnnl_batch_normalization: return sizeof(dnnl_batch_normalization_desc_t);
    case dnnl_layer_normalization: return sizeof(dnnl_layer_normalization_desc_t);
    case dnnl_softmax: return sizeof(dnnl_softmax_desc_t);
    case dnnl_logsoftmax: return sizeof(dnnl_logsoftmax_desc_t);
    default: return 0;
  }
}

void append_bytes(std::string& key, const void* data, size_t size) { key.append(static_cast<const char*>(data), size); }

template <typename T>
void append(std::string& key, const T& value) {
  append_bytes(key, &value, sizeof value);
}

std::optional<std::string> primitive_key(const dnnl::primitive_desc_base& pd) {
  dnnl_primitive_kind_t kind = dnnl_undefined_primitive;
  if (dnnl_primitive_desc_query(pd.get(), dnnl_query_primitive_kind, 0, &kind) != dnnl_success) return std::nullopt;
  const size_t size = op_desc_size(kind);
  const_dnnl_op_desc_t op = nullptr;
  if (size == 0 || dnnl_primitive_desc_query(pd.get(), dnnl_query_op_d, 0, &op) != dnnl_success || !op) return std::nullopt;
  std::string key;
  append(key, pd.get_engine().get());  // a primitive runs only on streams of its engine
  append(key, kind);
  append_bytes(key, op, size);
  key += pd.impl_info_str();
  key += '\0';
  append(key, omp_get_max_threads());
  // The layouts the implementation chose (the operation descriptor may say "any").
  static const int kArgs[] = {DNNL_ARG_SRC_0, DNNL_ARG_SRC_1, DNNL_ARG_SRC_2, DNNL_ARG_WEIGHTS, DNNL_ARG_BIAS,
                              DNNL_ARG_DST, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE, DNNL_ARG_SCALE_SHIFT,
                              DNNL_ARG_WORKSPACE, DNNL_ARG_SCRATCHPAD};
  for (int arg : kArgs) {
    const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(pd.get(), dnnl_query_exec_arg_md, arg);
    if (md) append(key, *md);
    key += '|';
  }
  const dnnl::primitive_attr attr = pd.get_primitive_attr();
  append(key, attr.get_scratchpad_mode());
  const dnnl::post_ops ops = attr.get_post_ops();
  append(key, ops.len());
  for (int i = 0; i < ops.len(); ++i) {
    const dnnl::primitive::kind op_kind = ops.kind(i);
    append(key, op_kind);
    if (op_kind == dnnl::primitive::kind::eltwise) {
      float scale = 0, alpha = 0, beta = 0;
      dnnl::algorithm algorithm{};
      ops.get_params_eltwise(i, scale, algorithm, alpha, beta);
      append(key, scale), append(key, algorithm), append(key, alpha), append(key, beta);
    } else if (op_kind == dnnl::primitive::kind::sum) {
      float scale = 0;
      int32_t zero_point = 0;
      memory::data_type type{};
      ops.get_params_sum(i, scale, zero_point, type);
      append(key, scale), append(key, zero_point), append(key, type);
    } else if (op_kind == dnnl::primitive::kind::binary) {
      dnnl::algorithm algorithm{};
      memory::desc operand;
      ops.get_params_binary(i, algorithm, operand);
      append(key, algorithm), append(key, operand.data);
    } else {
      return std::nullopt;
    }
  }
  int mask = 0;
  std::vector<float> scales;
  attr.get_output_scales(mask, scales);
  append(key, mask);
  append(key, scales.size());
  append_bytes(key, scales.data(), scales.size() * sizeof(float));
  for (int arg : {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST}) {
    std::vector<int32_t> zero_points;
    attr.get_zero_points(arg, mask, zero_points);
    append(key, mask);
    append(key, zero_points.size());
    append_bytes(key, zero_points.data(), zero_points.size() * sizeof(int32_t));
  }
  return key;
}

struct SharedPrimitives {
  std::mutex mutex;
  std::list<std::pair<std::string, dnnl::primitive>> entries;  // most recent first
  std::unordered_map<std::string, std::list<std::pair<std::string, dnnl::primitive>>::iterator> index;
  SharedPrimitiveCounts counts;
};

SharedPrimitives& shared_primitives() {
  static SharedPrimitives* shared = new SharedPrimitives;  // never destroyed: regions may outlive statics
  return *shared;
}

}  // namespace

dnnl::primitive create_shared_primitive(const dnnl::primitive_desc_base& pd) {
  std::optional<std::string> key;
  try {
    key = primitive_key(pd);
  } catch (const dnnl::error&) {
    key.reset();
  }
  SharedPrimitives& shared = shared_primitives();
  if (key) {
    std::lock_guard<std::mutex> lock(shared.mutex);
    if (auto it = shared.index.find(*key); it != shared.index.end()) {
      shared.entries.splice(shared.entries.begin(), shared.entries, it->second);
      ++shared.counts.hits;
      return it->second->second;
    }
  }
  // Created outside the lock: two regions asking for one new key at once both create it, and the map
  // keeps the last.
  dnnl::primitive primitive(pd.get());
  std::lock_guard<std::mutex> lock(shared.mutex);
  if (!key) {
    ++shared.counts.unkeyed;
    return primitive;
  }
  ++shared.counts.created;
  if (auto it = shared.index.find(*key); it != shared.index.end()) {
    shared.entries.erase(it->second);
    shared.index.erase(it);
  }
  shared.entries.emplace_front(*key, primitive);
  shared.index[*key] = shared.entries.begin();
  while (shared.entries.size() > kSharedPrimitives) {
    shared.index.erase(shared.entries.back().first);
    shared.entries.pop_back();
  }
  return primitive;
}

SharedPrimitiveCounts shared_primitive_counts() {
  SharedPrimitives& shared = shared_primitives();
  std::lock_guard<std::mutex> lock(shared.mutex);
  SharedPrimitiveCounts counts = shared.counts;
  counts.entries = static_cast<int64_t>(shared.entries.size());
  return counts;
}

}  // namespace tessera::dnnl_backend
