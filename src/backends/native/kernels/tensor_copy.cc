// The strided copy engine behind the data-movement kernels, and Transpose.
#include <algorithm>
#include <cstring>

#include "backends/native/dispatch.h"
#include "backends/native/kernels/tensor_internal.h"
#include "ir/shape_util.h"

namespace tessera::native {
namespace {

/// Drops size-1 dims and merges neighbours that are contiguous in the source,
/// so most copies become a few long rows.
void collapse_dims(Shape& shape, std::vector<int64_t>& strides) {
  Shape s;
  std::vector<int64_t> st;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!s.empty() && st.back() == strides[i] * shape[i]) {
      s.back() *= shape[i];
      st.back() = strides[i];
      continue;
    }
    s.push_back(shape[i]);
    st.push_back(strides[i]);
  }
  shape = std::move(s);
  strides = std::move(st);
}

/// An unsigned dtype of the given element size, for dispatch_by_size.
DType dtype_of_size(size_t element_size) {
  switch (element_size) {
    case 1: return DType::kUInt8;
    case 2: return DType::kUInt16;
    case 4: return DType::kUInt32;
    case 8: return DType::kUInt64;
    default: return DType::kUndefined;
  }
}

template <typename T>
void copy_rows(const T* src, int64_t src_offset, const std::vector<int64_t>& strides, T* dst, const Shape& shape,
               int64_t row_begin, int64_t row_end) {
  const size_t rank = shape.size();
  const int64_t n = shape[rank - 1];
  const int64_t s = strides[rank - 1];
  // Source offset of the first row from its multi-index.
  std::vector<int64_t> index(rank - 1, 0);
  int64_t offset = src_offset;
  for (int64_t r = row_begin, d = static_cast<int64_t>(rank) - 2; d >= 0; --d) {
    index[static_cast<size_t>(d)] = r % shape[static_cast<size_t>(d)];
    r /= shape[static_cast<size_t>(d)];
    offset += index[static_cast<size_t>(d)] * strides[static_cast<size_t>(d)];
  }
  for (int64_t row = row_begin; row < row_end; ++row) {
    T* out = dst + row * n;
    const T* in = src + offset;
    if (s == 1) {
      std::memcpy(out, in, static_cast<size_t>(n) * sizeof(T));
    } else if (s == 0) {
      std::fill(out, out + n, *in);
    } else {
      for (int64_t j = 0; j < n; ++j) out[j] = in[j * s];
    }
    for (size_t d = rank - 1; d-- > 0;) {
      offset += strides[d];
      if (++index[d] < shape[d]) break;
      offset -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
}

/// out[a][b] = in[b][a] for a block of `rows_here` x `cols_here`. With the
/// 8x8 size known at compile time the loops unroll into register shuffles.
template <typename T, int64_t kRows, int64_t kCols>
inline void transpose_block(const T* in, int64_t in_stride, T* out, int64_t out_stride) {
  for (int64_t a = 0; a < kRows; ++a) {
    for (int64_t b = 0; b < kCols; ++b) out[a * out_stride + b] = in[b * in_stride + a];
  }
}

template <typename T>
inline void transpose_block_edge(const T* in, int64_t in_stride, T* out, int64_t out_stride, int64_t rows_here,
                                 int64_t cols_here) {
  for (int64_t a = 0; a < rows_here; ++a) {
    for (int64_t b = 0; b < cols_here; ++b) out[a * out_stride + b] = in[b * in_stride + a];
  }
}

/// Batched 2-D transpose: out[o][a][b] = in[o-part + b*rows + a]. Works in
/// 64x64 tiles of 8x8 micro-blocks: small enough that the strided side does
/// not thrash L1 sets when rows is a power of two.
template <typename T>
void transpose_tiles(ThreadPool& pool, const T* src, int64_t src_offset, const std::vector<int64_t>& outer_strides,
                     const Shape& outer_shape, int64_t rows, int64_t cols, T* dst) {
  constexpr int64_t kTile = 64, kMicro = 8;
  const int64_t outer = shape_numel(outer_shape);
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  const int64_t plane = rows * cols;
  pool.parallel_for(outer * row_tiles, std::max<int64_t>(1, (1 << 14) / (kTile * std::max<int64_t>(cols, 1))),
                    [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      int64_t o = task / row_tiles;
      const int64_t a0 = (task % row_tiles) * kTile;
      int64_t offset = src_offset;
      for (size_t d = outer_shape.size(); d-- > 0;) {
        offset += (o % outer_shape[d]) * outer_strides[d];
        o /= outer_shape[d];
      }
      const T* in = src + offset;
      T* out = dst + (task / row_tiles) * plane;
      const int64_t a_end = std::min(rows, a0 + kTile);
      for (int64_t b0 = 0; b0 < cols; b0 += kTile) {
        const int64_t b_end = std::min(cols, b0 + kTile);
        for (int64_t a = a0; a < a_end; a += kMicro) {
          for (int64_t b = b0; b < b_end; b += kMicro) {
            const T* from = in + b * rows + a;
            T* to = out + a * cols + b;
            if (a + kMicro <= a_end && b + kMicro <= b_end) {
              transpose_block<T, kMicro, kMicro>(from, rows, to, cols);
            } else {
              transpose_block_edge(from, rows, to, cols, std::min(kMicro, a_end - a), std::min(kMicro, b_end - b));
            }
          }
        }
      }
    }
  });
}

}  // namespace

void strided_copy(ThreadPool& pool, size_t element_size, const void* src, int64_t src_offset,
                  std::vector<int64_t> src_strides, void* dst, Shape out_shape) {
  if (shape_numel(out_shape) == 0) return;
  collapse_dims(out_shape, src_strides);
  if (out_shape.empty()) {  // a single element
    out_shape = {1};
    src_strides = {1};
  }
  const int64_t n = out_shape.back();
  const int64_t rows = shape_numel(out_shape) / n;
  dispatch_by_size(dtype_of_size(element_size), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(src);
    T* out = static_cast<T*>(dst);
    pool.parallel_for(rows, std::max<int64_t>(1, (1 << 15) / n), [&](int64_t begin, int64_t end) {
      copy_rows(in, src_offset, src_strides, out, out_shape, begin, end);
    });
  });
}

void strided_copy_reference(size_t element_size, const void* src, int64_t src_offset,
                            const std::vector<int64_t>& src_strides, void* dst, const Shape& out_shape) {
  const int64_t total = shape_numel(out_shape);
  const auto* in = static_cast<const uint8_t*>(src);
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t i = 0; i < total; ++i) {
    int64_t offset = src_offset;
    for (int64_t r = i, d = static_cast<int64_t>(out_shape.size()) - 1; d >= 0; --d) {
      offset += (r % out_shape[static_cast<size_t>(d)]) * src_strides[static_cast<size_t>(d)];
      r /= out_shape[static_cast<size_t>(d)];
    }
    std::memcpy(out + i * static_cast<int64_t>(element_size), in + offset * static_cast<int64_t>(element_size),
                element_size);
  }
}

void transpose(ThreadPool& pool, const TensorView& in, const std::vector<int64_t>& perm, const TensorView& out) {
  std::vector<int64_t> in_strides = strides_of(in.shape);
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[static_cast<size_t>(perm[i])];
  Shape shape = out.shape;
  if (shape_numel(shape) == 0) return;
  collapse_dims(shape, strides);
  const size_t r = shape.size();
  // The innermost two output axes swapped in the source: a (batched) 2-D
  // transpose, where row-by-row copying would stride through memory.
  if (r >= 2 && strides[r - 2] == 1 && strides[r - 1] == shape[r - 2] && shape[r - 1] >= 4 && shape[r - 2] >= 4) {
    Shape outer_shape(shape.begin(), shape.end() - 2);
    std::vector<int64_t> outer_strides(strides.begin(), strides.end() - 2);
    dispatch_by_size(in.dtype, [&](auto tag) {
      using T = decltype(tag);
      transpose_tiles(pool, in.as<T>(), 0, outer_strides, outer_shape, shape[r - 2], shape[r - 1], out.as<T>());
    });
    return;
  }
  strided_copy(pool, dtype_size(in.dtype), in.data, 0, strides, out.data, shape);
}

void transpose_reference(const TensorView& in, const std::vector<int64_t>& perm, const TensorView& out) {
  std::vector<int64_t> in_strides = strides_of(in.shape);
  std::vector<int64_t> strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[static_cast<size_t>(perm[i])];
  strided_copy_reference(dtype_size(in.dtype), in.data, 0, strides, out.data, out.shape);
}

void copy_bytes(const TensorView& src, const TensorView& dst) {
  if (src.data != dst.data && src.nbytes() != 0) std::memmove(dst.data, src.data, src.nbytes());
}

std::vector<int64_t> read_ints(const TensorView& view) {
  std::vector<int64_t> out(static_cast<size_t>(view.numel()));
  for (int64_t i = 0; i < view.numel(); ++i) out[static_cast<size_t>(i)] = view_int_at(view, i);
  return out;
}

void store_scalar(DType dtype, double value, void* dst) {
  switch (dtype) {
    case DType::kFloat16: *static_cast<uint16_t*>(dst) = float_to_half(static_cast<float>(value)); return;
    case DType::kBFloat16: *static_cast<uint16_t*>(dst) = float_to_bfloat16(static_cast<float>(value)); return;
    case DType::kBool: *static_cast<uint8_t*>(dst) = value != 0 ? 1 : 0; return;
    default:
      dispatch_numeric(dtype, [&](auto tag) {
        using T = decltype(tag);
        *static_cast<T*>(dst) = static_cast<T>(value);
      });
  }
}

void fill_elements(void* dst, int64_t n, const void* value, size_t element_size) {
  dispatch_by_size(dtype_of_size(element_size), [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, value, sizeof(T));
    std::fill(static_cast<T*>(dst), static_cast<T*>(dst) + n, v);
  });
}

std::vector<int64_t> read_indices(const KernelContext& ctx, const TensorView& indices, int64_t dim) {
  std::vector<int64_t> out(static_cast<size_t>(indices.numel()));
  auto convert = [&](const auto* p) {
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t v = static_cast<int64_t>(p[i]);
      if (v < -dim || v >= dim) {
        ctx.fail("index ", v, " (at position ", i, " of the indices) is out of range for an axis of size ", dim);
      }
      out[i] = v < 0 ? v + dim : v;
    }
  };
  if (indices.dtype == DType::kInt64) convert(indices.as<int64_t>());
  else if (indices.dtype == DType::kInt32) convert(indices.as<int32_t>());
  else ctx.fail("indices have dtype ", dtype_name(indices.dtype), ", expected int32 or int64");
  return out;
}

}  // namespace tessera::native
