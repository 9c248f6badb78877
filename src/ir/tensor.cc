#include "ir/tensor.h"

#include <sys/mman.h>

#include <algorithm>

#include <cstdlib>
#include <cstring>
#include <new>

#include "ir/error.h"
#include "ir/shape_util.h"

namespace tessera {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    // Shapes can come from hostile models: never let the product overflow.
    if (__builtin_mul_overflow(n, d, &n)) throw_user_error("shape ", shape_to_string(shape), " has too many elements");
  }
  return n;
}

std::string shape_to_string(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += "x";
    out += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  return out;
}

void* allocate_aligned(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  // Large buffers (weights, packed weights, a long sequence's activations): 2 MiB-aligned and backed by
  // transparent huge pages where the kernel offers them on request, so that filling one takes a fault per
  // 2 MiB instead of per 4 KiB and streaming through it misses the TLB 512 times less often.
  constexpr size_t kHuge = size_t{2} << 20;
  if (rounded >= 2 * kHuge) {
    rounded = (rounded + kHuge - 1) / kHuge * kHuge;
    void* data = std::aligned_alloc(kHuge, rounded);
    if (!data) throw std::bad_alloc();
    ::madvise(data, rounded, MADV_HUGEPAGE);  // advice only: without THP the pages stay 4 KiB
    return data;
  }
  void* data = std::aligned_alloc(64, rounded);
  if (!data) throw std::bad_alloc();
  return data;
}

Buffer::Buffer(size_t nbytes, bool zero) : size_(nbytes) {
  data_ = allocate_aligned(nbytes);
  if (zero) std::memset(data_, 0, nbytes == 0 ? 64 : (nbytes + 63) / 64 * 64);
}

Buffer::Buffer(void* data, size_t nbytes, std::shared_ptr<const void> owner)
    : data_(data), size_(nbytes), owned_(false), owner_(std::move(owner)) {}

Buffer::~Buffer() {
  if (owned_) {
    auto* strings = static_cast<std::string*>(data_);
    for (size_t i = 0; i < strings_; ++i) strings[i].~basic_string();
    std::free(data_);
  }
}

void Buffer::construct_strings(size_t count) {
  auto* strings = static_cast<std::string*>(data_);
  for (; strings_ < count; ++strings_) new (&strings[strings_]) std::string();
}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_) {
    if (d < 0) throw_internal_error("tensor with negative dimension ", shape_to_string(shape_));
  }
  // Callers check sizes naming the node (check_tensor_size); this keeps nbytes() from wrapping regardless.
  check_tensor_size("a tensor", shape_, dtype_);
  buffer_ = std::make_shared<Buffer>(nbytes());
  if (dtype_ == DType::kString) buffer_->construct_strings(static_cast<size_t>(numel()));
}

namespace {
/// Copies n elements of `dtype`: strings one by one, everything else bytewise.
void copy_elements(void* dst, const void* src, DType dtype, int64_t n) {
  if (dtype == DType::kString) {
    std::copy_n(static_cast<const std::string*>(src), n, static_cast<std::string*>(dst));
  } else if (n) {
    std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(dtype));
  }
}
}  // namespace

std::vector<int64_t> view_strides(const TensorView& view) {
  return view.strided() ? view.strides : strides_of(view.shape);
}

bool is_padded_row_major(const Shape& shape, const std::vector<int64_t>& strides) {
  if (strides.size() != shape.size()) return false;
  int64_t span = 1;  // elements one step of the axis must clear
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] == 1) continue;
    if (d + 1 == shape.size() ? strides[d] != 1 : strides[d] < span) return false;
    span = strides[d] * shape[d];
  }
  return true;
}

bool is_contiguous(const TensorView& view) {
  if (view.strides.empty()) return true;
  const std::vector<int64_t> compact = strides_of(view.shape);
  for (size_t d = 0; d < view.shape.size(); ++d) {
    if (view.shape[d] != 1 && view.strides[d] != compact[d]) return false;
  }
  return true;
}

void copy_strided(const TensorView& dst, const TensorView& src) {
  if (dst.dtype != src.dtype || dst.shape != src.shape || dst.dtype == DType::kString) {
    throw_internal_error("strided copy of ", dtype_name(src.dtype), "[", shape_to_string(src.shape), "] into ",
                         dtype_name(dst.dtype), "[", shape_to_string(dst.shape), "]");
  }
  const int64_t n = src.numel();
  if (n == 0) return;
  const size_t rank = src.shape.size();
  const std::vector<int64_t> ds = view_strides(dst);
  const std::vector<int64_t> ss = view_strides(src);
  const size_t item = dtype_size(src.dtype);
  if (rank == 0) {
    std::memcpy(dst.data, src.data, item);
    return;
  }
  // Runs of the last axis (contiguous in both: stride 1, or a single element) copied at once.
  const int64_t run = src.shape[rank - 1];
  const bool rows = (run == 1 || (ds[rank - 1] == 1 && ss[rank - 1] == 1));
  const int64_t count = rows ? n / run : n;
  const size_t axes = rows ? rank - 1 : rank;
  std::vector<int64_t> index(axes, 0);
  auto* out = static_cast<char*>(dst.data);
  const auto* in = static_cast<const char*>(src.data);
  for (int64_t i = 0; i < count; ++i) {
    int64_t od = 0, os = 0;
    for (size_t d = 0; d < axes; ++d) {
      od += index[d] * ds[d];
      os += index[d] * ss[d];
    }
    std::memmove(out + od * static_cast<int64_t>(item), in + os * static_cast<int64_t>(item),
                 rows ? static_cast<size_t>(run) * item : item);
    for (size_t d = axes; d-- > 0;) {
      if (++index[d] < src.shape[d]) break;
      index[d] = 0;
    }
  }
}

void copy_view_data(const TensorView& dst, const TensorView& src) {
  if (dst.dtype != src.dtype || dst.numel() != src.numel()) {
    throw_internal_error("copy of ", dtype_name(src.dtype), "[", shape_to_string(src.shape), "] into ",
                         dtype_name(dst.dtype), "[", shape_to_string(dst.shape), "]");
  }
  if (!is_contiguous(dst) || !is_contiguous(src)) {
    return copy_strided(dst, src);  // (same shapes: checked there)
  }
  copy_elements(dst.data, src.data, src.dtype, src.numel());
}

Tensor Tensor::clone() const {
  Tensor copy(dtype_, shape_);
  copy_elements(copy.data(), data(), dtype_, numel());
  return copy;
}

Tensor Tensor::reshaped(Shape shape) const {
  if (shape_numel(shape) != numel()) {
    throw_internal_error("reshape of ", shape_to_string(shape_), " to ", shape_to_string(shape));
  }
  Tensor copy = *this;
  copy.shape_ = std::move(shape);
  return copy;
}

Tensor Tensor::from_view(const TensorView& view) {
  Tensor copy(view.dtype, view.shape);
  copy_elements(copy.data(), view.data, view.dtype, copy.numel());
  return copy;
}

namespace {
/// A tensor's shape is sizes, and its bytes fit in memory (internal: callers check what users give).
void check_tensor_shape(const Shape& shape, DType dtype) {
  for (int64_t d : shape) {
    if (d < 0) throw_internal_error("tensor with negative dimension ", shape_to_string(shape));
  }
  check_tensor_size("a tensor", shape, dtype);
}
}  // namespace

Tensor Tensor::uninitialized(DType dtype, Shape shape) {
  if (dtype == DType::kString) return Tensor(dtype, std::move(shape));  // strings are always constructed
  check_tensor_shape(shape, dtype);
  Tensor t = without_data(dtype, std::move(shape));
  t.buffer_ = std::make_shared<Buffer>(t.nbytes(), false);
  return t;
}

Tensor Tensor::without_data(DType dtype, Shape shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::wrap(DType dtype, Shape shape, void* data, std::shared_ptr<const void> owner) {
  check_tensor_shape(shape, dtype);
  Tensor t = without_data(dtype, std::move(shape));
  t.buffer_ = std::make_shared<Buffer>(data, t.nbytes(), std::move(owner));
  return t;
}

int64_t view_int_at(const TensorView& v, int64_t i) {
  switch (v.dtype) {
    case DType::kInt64: return v.as<int64_t>()[i];
    case DType::kInt32: return v.as<int32_t>()[i];
    case DType::kInt16: return v.as<int16_t>()[i];
    case DType::kInt8: return v.as<int8_t>()[i];
    case DType::kUInt8: return v.as<uint8_t>()[i];
    case DType::kUInt16: return v.as<uint16_t>()[i];
    case DType::kUInt32: return v.as<uint32_t>()[i];
    case DType::kUInt64: return static_cast<int64_t>(v.as<uint64_t>()[i]);
    case DType::kBool: return v.as<uint8_t>()[i] ? 1 : 0;
    case DType::kFloat32: return static_cast<int64_t>(v.as<float>()[i]);
    case DType::kFloat64: return static_cast<int64_t>(v.as<double>()[i]);
    case DType::kFloat16: return static_cast<int64_t>(half_to_float(v.as<uint16_t>()[i]));
    case DType::kBFloat16: return static_cast<int64_t>(bfloat16_to_float(v.as<uint16_t>()[i]));
    default: throw_internal_error("int_at on ", dtype_name(v.dtype));
  }
}

double view_double_at(const TensorView& v, int64_t i) {
  switch (v.dtype) {
    case DType::kFloat32: return v.as<float>()[i];
    case DType::kFloat64: return v.as<double>()[i];
    case DType::kFloat16: return half_to_float(v.as<uint16_t>()[i]);
    case DType::kBFloat16: return bfloat16_to_float(v.as<uint16_t>()[i]);
    case DType::kUInt64: return static_cast<double>(v.as<uint64_t>()[i]);
    default: return static_cast<double>(view_int_at(v, i));
  }
}

int64_t Tensor::int_at(int64_t i) const { return view_int_at(view(), i); }
double Tensor::double_at(int64_t i) const { return view_double_at(view(), i); }

std::vector<int64_t> Tensor::to_int64_vector() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = int_at(i);
  return out;
}

}  // namespace tessera
