// Small helpers shared by shape inference and kernels.
#pragma once
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
/// False when the shape's byte size would overflow or exceed 2^48 bytes
/// (unknown dims, -1, are ignored). Checked before anything multiplies sizes.
bool shape_fits_in_memory(const Shape& shape, DType dtype);
/// Product of dims [begin, end) of a shape (1 when empty); overflow is a user error.
int64_t shape_product(const Shape& shape, size_t begin, size_t end);
/// Row-major strides of a shape.
std::vector<int64_t> strides_of(const Shape& shape);
/// Strides to read `from` as if broadcast to `to` (0 on broadcast dims).
std::vector<int64_t> broadcast_strides(const Shape& from, const Shape& to);

}  // namespace tessera
