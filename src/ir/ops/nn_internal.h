// Internal to the nn op family: the per-group registration functions called
// from register_nn_ops and the matmul output rule. The window geometry the
// schemas and kernels of Conv, ConvTranspose and the pooling ops share lives
// in ir/window_geometry.h (included here for them).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op_schema.h"
#include "ir/window_geometry.h"  // WindowGeometry, window_geometry, conv_transpose_geometry

namespace tessera {

class OpRegistry;

/// Output 0 of a numpy matmul of inputs a_input and b_input (1-D operands,
/// broadcast batch dims), with `dtype`; shared by MatMul and the integer matmuls.
/// MatMul's output type; `transpose_b`: B's last two dims swapped first.
void set_matmul_output(InferContext& ctx, size_t a_input, size_t b_input, DType dtype, bool transpose_b = false);

void register_nn_conv_ops(OpRegistry& registry);
void register_nn_pool_ops(OpRegistry& registry);
void register_nn_norm_ops(OpRegistry& registry);

}  // namespace tessera
