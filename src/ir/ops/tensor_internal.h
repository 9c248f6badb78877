// Internal to the tensor op family (src/ir/ops/tensor*.cc and the native
// tensor kernels): registration of the op groups, and the shape arithmetic
// that both shape inference and the kernels need, so the two cannot disagree.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op_schema.h"

namespace tessera {

// One registration function per group of tensor ops.
void register_tensor_shape_ops(OpRegistry& registry);   // Constant, Reshape, Shape, Range, Expand...
void register_tensor_layout_ops(OpRegistry& registry);  // Transpose, Concat, Split, Slice, Pad, Tile...
void register_tensor_index_ops(OpRegistry& registry);   // Gather*, Scatter*, OneHot, NonZero, Unique...

/// A large upper bound for variadic inputs/outputs (Concat, Split).
constexpr int kManyValues = 1 << 30;

/// A 1-D int64 tensor holding `values`.
Tensor int64_tensor(const std::vector<int64_t>& values);
/// Moves the ints attribute `attr` (when present) into input `position` as a
/// constant, for normalising legacy forms. Returns whether it moved anything.


/// Reshape's target shape: 0 copies the input dim (unless allowzero), -1 is
/// inferred. Input dims may be -1 (unknown); the result then has -1 where it
/// cannot be computed.
Shape reshape_output_shape(const Node& node, const Shape& input, const std::vector<int64_t>& target, bool allowzero);

/// Slice resolved to one start and step per input axis, and the output shape.
/// Input dims may be -1 (unknown at compile time): their output dims are -1.
struct SliceSpec {
  std::vector<int64_t> starts;
  std::vector<int64_t> steps;
  Shape output;
};
SliceSpec resolve_slice(const Node& node, const Shape& input, const std::vector<int64_t>& starts,
                        const std::vector<int64_t>& ends, const std::optional<std::vector<int64_t>>& axes,
                        const std::optional<std::vector<int64_t>>& steps);

/// Pad's pads ([begin..., end...] over `axes`, default all) as 2*rank values.
std::vector<int64_t> resolve_pads(const Node& node, int64_t rank, const std::vector<int64_t>& pads,
                                  const std::optional<std::vector<int64_t>>& axes);

/// Sizes of Split's outputs along the axis: the split values when given,
/// else equal parts (the last one smaller when the dim does not divide).
std::vector<int64_t> resolve_split(const Node& node, int64_t dim, size_t num_outputs,
                                   const std::optional<std::vector<int64_t>>& split);

/// Shape's [start, end) over a rank after opset 15's clamping.
std::pair<int64_t, int64_t> shape_op_range(const AttributeMap& attrs, int64_t rank);

/// Transpose's permutation: the perm attribute, or reversed axes by default.
std::vector<int64_t> transpose_perm(const Node& node, int64_t rank);

/// Maps ONNX TensorProto element types (as in EyeLike's `dtype`) to DType.


}  // namespace tessera
