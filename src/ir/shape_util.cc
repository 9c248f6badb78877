#include "ir/shape_util.h"

#include <algorithm>
#include <cstdint>

namespace tessera {

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else if (da < 0 || db < 0) {
      out[i] = -1;
    } else {
      throw_user_error("shapes ", shape_to_string(a), " and ", shape_to_string(b), " cannot be broadcast");
    }
  }
  return out;
}

int64_t normalize_axis(int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= rank) {
    throw_user_error(what, " ", axis, " is out of range for rank ", rank);
  }
  return axis < 0 ? axis + rank : axis;
}

std::optional<int64_t> tensor_byte_size(const Shape& shape, DType dtype) {
  int64_t bytes = std::max<int64_t>(1, static_cast<int64_t>(dtype_size(dtype)));
  for (int64_t d : shape) {
    if (d <= 1) continue;
    if (bytes > kMaxTensorBytes / d) return std::nullopt;
    bytes *= d;
  }
  return bytes;
}

bool shape_fits_in_memory(const Shape& shape, DType dtype) { return tensor_byte_size(shape, dtype).has_value(); }

void check_tensor_size(const std::string& what, const Shape& shape, DType dtype) {
  if (shape_fits_in_memory(shape, dtype)) return;
  throw_user_error(what, " would have shape ", shape_to_string(shape), " (", dtype_name(dtype),
                   "), which is too large (over ", kMaxTensorBytes >> 40, " TiB)");
}

int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t product;
  if (__builtin_mul_overflow(a, b, &product)) return INT64_MAX;
  return product;
}

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum;
  if (__builtin_add_overflow(a, b, &sum)) return a < 0 ? INT64_MIN : INT64_MAX;
  return sum;
}

int64_t shape_product(const Shape& shape, size_t begin, size_t end) {
  return shape_numel(Shape(shape.begin() + static_cast<std::ptrdiff_t>(begin), shape.begin() + static_cast<std::ptrdiff_t>(end)));
}

std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

std::vector<int64_t> broadcast_strides(const Shape& from, const Shape& to) {
  std::vector<int64_t> own = strides_of(from);
  std::vector<int64_t> out(to.size(), 0);
  size_t offset = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i) {
    out[i + offset] = from[i] == 1 ? 0 : own[i];
  }
  return out;
}

}  // namespace tessera
