// Internal to the native tensor kernels (kernels/tensor*.cc): the strided
// copy engine most data-movement ops reduce to, Transpose with its reference,
// and small helpers for reading index and shape inputs.
#pragma once
#include <cstdint>
#include <vector>

#include "backends/native/kernel.h"
#include "ir/tensor.h"

namespace tessera::native {

// One registration function per kernel group.
void register_tensor_shape_kernels(KernelRegistry& registry);
void register_tensor_layout_kernels(KernelRegistry& registry);
void register_tensor_index_kernels(KernelRegistry& registry);
void register_unique_kernel(KernelRegistry& registry);

/// Fills contiguous `dst` of shape `out_shape` with the elements of `src` read
/// at src_offset + sum(index[d] * src_strides[d]) (offsets and strides in
/// elements, may be negative or 0). Expand, Slice, Tile, Transpose and
/// Depth/SpaceToDepth are all this with different strides. Collapses
/// mergeable dims and copies rows with memcpy/fill where the stride allows.
void strided_copy(ThreadPool& pool, size_t element_size, const void* src, int64_t src_offset,
                  std::vector<int64_t> src_strides, void* dst, Shape out_shape);
/// Element-by-element version of strided_copy, for tests.
void strided_copy_reference(size_t element_size, const void* src, int64_t src_offset,
                            const std::vector<int64_t>& src_strides, void* dst, const Shape& out_shape);

/// out = transpose(in, perm); out must already have the permuted shape.
/// Uses cache-blocked tiles when the innermost axes swap (NCHW<->NHWC, 2-D).
void transpose(ThreadPool& pool, const TensorView& in, const std::vector<int64_t>& perm, const TensorView& out);
void transpose_reference(const TensorView& in, const std::vector<int64_t>& perm, const TensorView& out);

/// Copies all of src into dst (same byte size) unless they alias.
void copy_bytes(const TensorView& src, const TensorView& dst);
/// All values of an integer (or any numeric) tensor as int64.
std::vector<int64_t> read_ints(const TensorView& view);
/// Writes `value` converted to dtype at dst (one element).
void store_scalar(DType dtype, double value, void* dst);
/// Fills n elements of element_size bytes at dst with the element at value.
void fill_elements(void* dst, int64_t n, const void* value, size_t element_size);
/// Reads int32/int64 indices into int64, wrapping negative ones by `dim`;
/// an index outside [-dim, dim) fails naming the node and the value.
std::vector<int64_t> read_indices(const KernelContext& ctx, const TensorView& indices, int64_t dim);

}  // namespace tessera::native
