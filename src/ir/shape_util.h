// Small helpers shared by shape inference and kernels.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/tensor.h"

namespace tessera {

/// Numpy broadcasting of two shapes; throws a user error on mismatch.
Shape broadcast_shapes(const Shape& a, const Shape& b);
/// Maps a possibly negative axis into [0, rank); throws when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* what = "axis");
/// The most bytes one tensor may take (1 TiB). Every shape Tessera allocates
/// is checked against it first: model inputs, shapes inferred at compile time,
/// and shapes computed from input values at run time (Range, ConstantOfShape,
/// Expand, Tile, OneHot, Resize, ...), so a hostile value is a user error
/// before any backend sees the shape, never a wrapped byte count.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 40;
/// The byte size of a tensor of `shape` and `dtype`, computed without
/// overflow, when it is at most kMaxTensorBytes; nullopt otherwise. Dims of 0
/// and 1 and unknown dims (-1) count as 1, so that no product of a subset of
/// the dims (strides, row sizes) can overflow either.
std::optional<int64_t> tensor_byte_size(const Shape& shape, DType dtype);
/// tensor_byte_size(shape, dtype).has_value().
bool shape_fits_in_memory(const Shape& shape, DType dtype);
/// The one size check: a user error "<what> would have shape 2^61 (float32),
/// which is too large (over 1 TiB)" when the shape does not fit. `what` names
/// the node and output, e.g. "node 'r' (Range): output 0".
void check_tensor_size(const std::string& what, const Shape& shape, DType dtype);
/// The same, building `what` (a callable returning the string) only when the shape does not fit:
/// for checks on a hot path (every node run, every allocation), where formatting the name costs more
/// than the check.
template <typename What>
void check_tensor_size_lazy(const What& what, const Shape& shape, DType dtype) {
  if (!shape_fits_in_memory(shape, dtype)) check_tensor_size(what(), shape, dtype);
}
/// a * b and a + b for non-negative dims, saturating at INT64_MAX instead of
/// overflowing: shape inference computes with them and check_tensor_size then
/// rejects the saturated dim.
int64_t saturating_mul(int64_t a, int64_t b);
int64_t saturating_add(int64_t a, int64_t b);
/// Product of dims [begin, end) of a shape (1 when empty); overflow is a user error.
int64_t shape_product(const Shape& shape, size_t begin, size_t end);
/// Row-major strides of a shape.
std::vector<int64_t> strides_of(const Shape& shape);
/// Strides to read `from` as if broadcast to `to` (0 on broadcast dims).
std::vector<int64_t> broadcast_strides(const Shape& from, const Shape& to);

}  // namespace tessera
