// Layouts as oneDNN memory descriptors: plain row-major descriptors for the
// region's boundary values, and the format tag that names a layout a
// primitive chose (the payload stores tags, never raw descriptors, so a
// loaded layout is always one oneDNN itself can make).
#include <algorithm>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/dnnl/dnnl_internal.h"
#include "ir/error.h"

namespace tessera::dnnl_backend {

memory::data_type data_type_of(SlotType type) {
  switch (type) {
    case SlotType::kFloat32: return memory::data_type::f32;
    case SlotType::kBFloat16: return memory::data_type::bf16;
    case SlotType::kUInt8: return memory::data_type::u8;
    case SlotType::kInt8: return memory::data_type::s8;
  }
  return memory::data_type::f32;
}

SlotType slot_type_for(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return SlotType::kFloat32;
    case DType::kUInt8: return SlotType::kUInt8;
    case DType::kInt8: return SlotType::kInt8;
    default: throw_unsupported("oneDNN backend: a region boundary value of dtype ", dtype_name(dtype));
  }
}

SlotType slot_type_of(const memory::desc& desc) {
  switch (desc.data_type()) {
    case memory::data_type::f32: return SlotType::kFloat32;
    case memory::data_type::bf16: return SlotType::kBFloat16;
    case memory::data_type::u8: return SlotType::kUInt8;
    case memory::data_type::s8: return SlotType::kInt8;
    default: throw_unsupported("oneDNN backend: a layout of data type ", static_cast<int>(desc.data_type()));
  }
}

memory::desc plain_desc(const std::vector<int64_t>& dims, memory::data_type type) {
  memory::dims d(dims.begin(), dims.end());
  if (d.empty()) d = {1};  // oneDNN has no rank-0 tensors; a scalar is one element
  memory::dims strides(d.size(), 1);
  for (size_t i = d.size() - 1; i > 0; --i) strides[i - 1] = strides[i] * d[i];
  return memory::desc(d, type, strides);
}

memory::desc desc_of(const Slot& slot) {
  memory::dims d(slot.dims.begin(), slot.dims.end());
  if (d.empty()) d = {1};
  const memory::data_type type = data_type_of(slot.type);
  if (slot.format_tag == 0 || slot.format_tag == kLayoutOfReader) return plain_desc(slot.dims, type);  // the latter: until a reader chooses
  return memory::desc(d, type, static_cast<memory::format_tag>(slot.format_tag));
}

bool cpu_has_native_bf16() {
  // ISA values are nested bit sets; ONEDNN_MAX_CPU_ISA lowers the effective one.
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

bool cpu_has_vnni() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512_vnni = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_vnni);
  const auto avx2_vnni = static_cast<unsigned>(dnnl::cpu_isa::avx2_vnni);
  return (isa & avx512_vnni) == avx512_vnni || (isa & avx2_vnni) == avx2_vnni;
}

std::string effective_isa_name() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "isa" + std::to_string(static_cast<int>(dnnl::get_effective_cpu_isa()));
  }
}

bool is_plain(const memory::desc& desc) {
  memory::dims dims = desc.dims();
  return desc == plain_desc(std::vector<int64_t>(dims.begin(), dims.end()), desc.data_type());
}

namespace {

/// The tag whose descriptor for `desc`'s dims equals `desc`, by trying each
/// (about 500; 15-90 us), or -1.
int32_t scan_format_tags(const memory::desc& desc) {
  const memory::dims dims = desc.dims();
  for (int tag = dnnl_format_tag_any + 1; tag < dnnl_format_tag_last; ++tag) {
    dnnl_memory_desc_t candidate;
    if (dnnl_memory_desc_init_by_tag(&candidate, static_cast<int>(dims.size()), dims.data(), desc.data.data_type,
                                     static_cast<dnnl_format_tag_t>(tag)) != dnnl_success) {
      continue;
    }
    if (dnnl_memory_desc_equal(&candidate, &desc.data)) return tag;
  }
  return -1;
}

/// What a layout is regardless of dims: rank, element type, inner blocks and
/// the order of the strides. Equal signatures usually share a tag (dims of 1
/// can make the order ambiguous: the guess is checked).
std::string layout_signature(const memory::desc& desc) {
  const dnnl_memory_desc_t& md = desc.data;
  std::string key = std::to_string(md.ndims) + "/" + std::to_string(md.data_type) + "/" + std::to_string(md.format_kind);
  if (md.format_kind != dnnl_blocked) return key;
  const dnnl_blocking_desc_t& blocking = md.format_desc.blocking;
  for (int i = 0; i < blocking.inner_nblks; ++i) {
    key += "/" + std::to_string(blocking.inner_idxs[i]) + "x" + std::to_string(blocking.inner_blks[i]);
  }
  std::vector<int> order(static_cast<size_t>(md.ndims));
  for (int d = 0; d < md.ndims; ++d) order[static_cast<size_t>(d)] = d;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return blocking.strides[a] > blocking.strides[b]; });
  key += "/";
  for (int d : order) key += static_cast<char>('a' + d);
  return key;
}

}  // namespace

int32_t format_tag_of(const memory::desc& desc) {
  if (is_plain(desc)) return 0;
  // Lowering a region for each new shape asks for the tags of the same few
  // layouts at new dims: remember the tag of each layout signature, check it
  // with one descriptor, and scan only when that fails.
  static std::mutex mutex;
  static std::unordered_map<std::string, int32_t> known;
  const std::string key = layout_signature(desc);
  int32_t guess = -1;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = known.find(key);
    if (it != known.end()) guess = it->second;
  }
  if (guess > 0) {
    const memory::dims dims = desc.dims();
    dnnl_memory_desc_t candidate;
    if (dnnl_memory_desc_init_by_tag(&candidate, static_cast<int>(dims.size()), dims.data(), desc.data.data_type,
                                     static_cast<dnnl_format_tag_t>(guess)) == dnnl_success &&
        dnnl_memory_desc_equal(&candidate, &desc.data)) {
      return guess;
    }
  }
  const int32_t tag = scan_format_tags(desc);
  if (tag > 0) {
    std::lock_guard<std::mutex> lock(mutex);
    known[key] = tag;
  }
  return tag;
}

int64_t element_count(const memory::desc& desc) {
  int64_t n = 1;
  for (memory::dim d : desc.dims()) n *= d;
  return n;
}

bool is_reference(const dnnl::primitive_desc_base& pd) { return std::string(pd.impl_info_str()).rfind("ref", 0) == 0; }

bool channel_blocked(const memory::desc& desc, int64_t& block, int64_t strides[4]) {
  const dnnl_memory_desc_t& md = desc.data;
  if (md.format_kind != dnnl_blocked || md.ndims != 4 || md.offset0 != 0 || md.data_type != dnnl_f32) return false;
  const dnnl_blocking_desc_t& blocking = md.format_desc.blocking;
  if (blocking.inner_nblks != 1 || blocking.inner_idxs[0] != 1) return false;
  block = blocking.inner_blks[0];
  if (block != 8 && block != 16) return false;
  if (blocking.strides[3] != block) return false;  // columns of `block` contiguous channels
  for (int d = 0; d < 4; ++d) strides[d] = blocking.strides[d];
  return md.padded_dims[1] % block == 0;
}

memory::desc layout_like(const memory::desc& like, const std::vector<int64_t>& dims) {
  const int32_t tag = format_tag_of(like);
  if (tag <= 0 || static_cast<size_t>(like.dims().size()) != dims.size()) return plain_desc(dims, like.data_type());
  return memory::desc(memory::dims(dims.begin(), dims.end()), like.data_type(), static_cast<memory::format_tag>(tag));
}

}  // namespace tessera::dnnl_backend
