// Concatenation as plain copies (contract in dnnl_internal.h, concat_copy_plan).
//
// oneDNN 2.6 runs a channel concatenation of blocked layouts (nChw8c,
// nChw16c) on its `simple:any` implementation at about 2 GB/s on one core:
// SqueezeNet's Concats took 21% of the model. When every input is, in the
// output's own layout, one contiguous run per index of the dims before the
// axis (true for plain layouts and for blocked ones whose channel counts are
// multiples of the block), the concatenation is a few memcpys at memory speed.
#include <cstring>

#include "backends/dnnl/dnnl_internal.h"

namespace tessera::dnnl_backend {

std::optional<ConcatCopyPlan> concat_copy_plan(const std::vector<memory::desc>& roles, int axis) {
  if (roles.size() < 2) return std::nullopt;
  const dnnl_memory_desc_t& out = roles.back().data;
  if (axis < 0 || axis >= out.ndims) return std::nullopt;
  ConcatCopyPlan plan;
  plan.outer = 1;
  for (int d = 0; d < axis; ++d) plan.outer *= out.dims[d];
  if (plan.outer <= 0) return std::nullopt;
  const size_t element_bytes = memory::data_type_size(roles.back().data_type());
  int64_t axis_total = 0;
  for (const memory::desc& role : roles) {
    const dnnl_memory_desc_t& md = role.data;
    const dnnl_blocking_desc_t& blocking = md.format_desc.blocking;
    const dnnl_blocking_desc_t& out_blocking = out.format_desc.blocking;
    if (md.format_kind != dnnl_blocked || md.ndims != out.ndims || md.offset0 != 0 || md.data_type != out.data_type) {
      return std::nullopt;
    }
    if (blocking.inner_nblks != out_blocking.inner_nblks) return std::nullopt;
    int64_t axis_block = 1;
    for (int b = 0; b < blocking.inner_nblks; ++b) {
      if (blocking.inner_blks[b] != out_blocking.inner_blks[b] || blocking.inner_idxs[b] != out_blocking.inner_idxs[b]) {
        return std::nullopt;
      }
      if (blocking.inner_idxs[b] == axis) axis_block *= blocking.inner_blks[b];
    }
    for (int d = 0; d < md.ndims; ++d) {
      if (md.padded_dims[d] != md.dims[d] || md.padded_offsets[d] != 0) return std::nullopt;  // no padding
      if (d != axis && md.dims[d] != out.dims[d]) return std::nullopt;
      if (d > axis && blocking.strides[d] != out_blocking.strides[d]) return std::nullopt;  // same layout inside a run
    }
    if (md.dims[axis] % axis_block != 0) return std::nullopt;
    // One dense run per outer index, the axis's outer block index the most major inside it.
    const int64_t run = element_count(role) / plan.outer;
    if (blocking.strides[axis] * (md.dims[axis] / axis_block) != run) return std::nullopt;
    int64_t stride = run;
    for (int d = axis - 1; d >= 0; --d) {
      if (md.dims[d] > 1 && blocking.strides[d] != stride) return std::nullopt;
      stride *= md.dims[d];
    }
    if (&role != &roles.back()) {
      plan.run_bytes.push_back(static_cast<size_t>(run) * element_bytes);
      axis_total += md.dims[axis];
    } else {
      plan.output_run_bytes = static_cast<size_t>(run) * element_bytes;
    }
  }
  if (axis_total != out.dims[axis]) return std::nullopt;
  return plan;
}

void run_concat_copy(const ConcatCopyPlan& plan, const std::vector<const void*>& sources, void* output,
                     const std::vector<char>& in_place) {
  auto* out = static_cast<char*>(output);
  for (int64_t o = 0; o < plan.outer; ++o) {
    char* dst = out + static_cast<size_t>(o) * plan.output_run_bytes;
    for (size_t i = 0; i < sources.size(); ++i) {
      if (!in_place.empty() && in_place[i]) {
        dst += plan.run_bytes[i];
        continue;
      }
      std::memcpy(dst, static_cast<const char*>(sources[i]) + static_cast<size_t>(o) * plan.run_bytes[i], plan.run_bytes[i]);
      dst += plan.run_bytes[i];
    }
  }
}

}  // namespace tessera::dnnl_backend
