// Tensors: TensorView (non-owning, what kernels see) and Tensor (owning, used
// for constants, run-time allocations and results).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace tessera {

using Shape = std::vector<int64_t>;

/// What a value is. Tensors are what backends compute on; sequences (an
/// ordered list of tensors of one dtype) and optionals (a tensor or a sequence,
/// or nothing) are first-class values that only the native backend takes
/// (the partitioner keeps their nodes there). At run time they live in a
/// BoxedValue, never in a tensor.
enum class ValueKind : uint8_t { kTensor = 0, kSequence, kOptionalTensor, kOptionalSequence };
constexpr uint8_t kLastValueKind = 3;
/// "tensor", "sequence", "optional tensor", "optional sequence".
const char* value_kind_name(ValueKind kind);
/// The same with its article: "a tensor", "a sequence", "an optional tensor", "an optional sequence".
std::string value_kind_phrase(ValueKind kind);

int64_t shape_numel(const Shape& shape);
std::string shape_to_string(const Shape& shape);  // "1x3x224x224", "scalar" for rank 0

/// A non-owning view of row-major data: contiguous, or, where `strides` is
/// set, a box inside a larger row-major buffer (a caller's bound buffer, e.g. a
/// key/value cache with room to grow). Only what declares it reads or writes
/// strided views (ExecutableRegion::reads_strided / writes_into); everything
/// else sees contiguous ones.
struct TensorView {
  DType dtype = DType::kUndefined;
  Shape shape;
  void* data = nullptr;
  /// Elements between neighbours along each axis; empty: contiguous. When set,
  /// padded row-major (is_padded_row_major).
  std::vector<int64_t> strides;

  int64_t numel() const { return shape_numel(shape); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
  bool strided() const { return !strides.empty(); }
};

/// The view's strides in elements: its own, or the row-major ones of its shape (shape_util's strides_of).
std::vector<int64_t> view_strides(const TensorView& view);
/// True when `strides` lays `shape` out as a box of a larger row-major buffer:
/// the last axis contiguous (stride 1) and each other axis's stride at least
/// the span of the axes after it (axes of size 1 may have any stride), so no
/// two elements share memory.
bool is_padded_row_major(const Shape& shape, const std::vector<int64_t>& strides);
/// True when the view's elements are contiguous (no strides, or strides that
/// equal strides_of(shape) where the axis has more than one element).
bool is_contiguous(const TensorView& view);
/// Copies between views of the same dtype and shape, either or both strided
/// (not strings).
void copy_strided(const TensorView& dst, const TensorView& src);

/// `bytes` of 64-byte aligned memory (large ones on transparent huge pages where the kernel allows),
/// freed with std::free; throws std::bad_alloc.
void* allocate_aligned(size_t bytes);

/// 64-byte aligned storage: owned, or external memory kept alive by an owner.
class Buffer {
 public:
  /// Zero-filled unless `zero` is false (for scratch memory that is always written before it is read).
  explicit Buffer(size_t nbytes, bool zero = true);
  /// External memory (e.g. a mapped artifact): not freed by the buffer; `owner`
  /// is held until the buffer dies, so the memory outlives every tensor on it.
  Buffer(void* data, size_t nbytes, std::shared_ptr<const void> owner);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  void* data() const { return data_; }
  size_t size() const { return size_; }
  /// Makes the first `count` elements std::strings (a string tensor's storage),
  /// destroyed with the buffer.
  void construct_strings(size_t count);

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
  size_t strings_ = 0;
  bool owned_ = true;
  std::shared_ptr<const void> owner_;
};

/// An owning tensor. Copies share the storage (cheap); use clone() for a deep copy.
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-initialised

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  void* data() const { return buffer_ ? buffer_->data() : nullptr; }
  template <typename T>
  T* as() const { return static_cast<T*>(data()); }
  TensorView view() const { return TensorView{dtype_, shape_, data()}; }
  Tensor clone() const;
  /// Same data, another shape of the same element count.
  Tensor reshaped(Shape shape) const;
  bool defined() const { return dtype_ != DType::kUndefined; }

  static Tensor from_view(const TensorView& view);  // deep copy
  /// A tensor with a shape and no data (data() is null), for ops that read
  /// only shapes (OpSchema::reads_shapes_only).
  static Tensor without_data(DType dtype, Shape shape);
  /// A tensor whose elements are left unwritten (not strings), for a caller that writes every one
  /// (e.g. a constant copied in from a file).
  static Tensor uninitialized(DType dtype, Shape shape);
  /// A tensor over external memory of at least nbytes() bytes, which must stay
  /// valid while `owner` lives (no copy; e.g. constants in a mapped artifact).
  /// Read-only mappings must only be read through the tensor.
  static Tensor wrap(DType dtype, Shape shape, void* data, std::shared_ptr<const void> owner);
  /// Element i converted to int64 / double, for any numeric dtype.
  int64_t int_at(int64_t i) const;
  double double_at(int64_t i) const;
  std::vector<int64_t> to_int64_vector() const;

 private:
  DType dtype_ = DType::kUndefined;
  Shape shape_;
  std::shared_ptr<Buffer> buffer_;
};

/// The run-time value of a sequence or an optional (ValueKind in the graph
/// says which): a sequence's tensors in order; an optional tensor holds one
/// tensor when present; an optional sequence holds the sequence's tensors
/// when present. Tensors in a box are owned (copies share storage).
struct BoxedValue {
  ValueKind kind = ValueKind::kSequence;
  bool present = true;
  std::vector<Tensor> items;
};

/// Copies src's elements into dst (same dtype and element count): strings
/// one by one, everything else bytewise.
void copy_view_data(const TensorView& dst, const TensorView& src);

int64_t view_int_at(const TensorView& view, int64_t i);
double view_double_at(const TensorView& view, int64_t i);

}  // namespace tessera
