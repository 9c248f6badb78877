// Internal to the nn op family: the window geometry shared by the schemas
// (shape inference) and the native kernels of Conv, ConvTranspose and the
// pooling ops, so that both sides agree on pads and output sizes, and the
// per-group registration functions called from register_nn_ops.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op_schema.h"

namespace tessera {

class OpRegistry;

/// Sliding-window geometry over the spatial dims of an NC... tensor.
struct WindowGeometry {
  std::vector<int64_t> input;      // spatial input sizes
  std::vector<int64_t> kernel;     // kernel sizes
  std::vector<int64_t> stride;
  std::vector<int64_t> dilation;
  std::vector<int64_t> pad_begin;
  std::vector<int64_t> pad_end;
  std::vector<int64_t> output;     // spatial output sizes
  size_t rank() const { return input.size(); }
  int64_t output_size() const;     // product of output
  int64_t input_size() const;      // product of input
  int64_t kernel_size() const;     // product of kernel
};

/// Geometry of Conv / MaxPool / AveragePool / LpPool from the node's
/// attributes (auto_pad, pads, strides, dilations, ceil_mode) and the spatial
/// input and kernel sizes. Throws a user error naming the node on bad values.
WindowGeometry window_geometry(const Node& node, const std::vector<int64_t>& input_spatial,
                               const std::vector<int64_t>& kernel_spatial, bool allow_ceil_mode);

/// Geometry of ConvTranspose: `input` is the ConvTranspose input, `output` the
/// larger result; pads are those of the equivalent forward convolution.
WindowGeometry conv_transpose_geometry(const Node& node, const std::vector<int64_t>& input_spatial,
                                       const std::vector<int64_t>& kernel_spatial);

/// Output 0 of a numpy matmul of inputs a_input and b_input (1-D operands,
/// broadcast batch dims), with `dtype`; shared by MatMul and the integer matmuls.
void set_matmul_output(InferContext& ctx, size_t a_input, size_t b_input, DType dtype);

void register_nn_conv_ops(OpRegistry& registry);
void register_nn_pool_ops(OpRegistry& registry);
void register_nn_norm_ops(OpRegistry& registry);

}  // namespace tessera
