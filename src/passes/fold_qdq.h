// Folding QDQ patterns into the quantized ops they stand for.
//
// A QDQ model (what `tessera quantize` and ONNX Runtime's quantizer write)
// says "compute this Conv on 8-bit values" as
//   DequantizeLinear(x_q) ─┐
//   DequantizeLinear(w_q) ─┼─ Conv ─ [Relu | Clip] ─ QuantizeLinear ─ y_q
//   DequantizeLinear(b_q) ─┘
// This pass rewrites such a chain into the one ONNX op with the same
// meaning, QLinearConv(x_q, x_scale, x_zp, w_q, w_scale, w_zp, y_scale, y_zp,
// b_q), and MatMul the same way into QLinearMatMul, so that backends with
// integer kernels (oneDNN's int8 convolutions and matmuls with VNNI, native's
// reference ones) run it on the 8-bit values. It folds only what stays
// exact up to the rounding of the requantisation:
//   - scales and zero points are constant scalars (w_scale may be one per
//     output channel), w_q is a constant, the bias is int32 with zero point
//     0 and scale x_scale * w_scale (to float rounding);
//   - a Relu between the op and the QuantizeLinear folds when y_zp is the
//     type's lowest value (the saturation then is the Relu), a Clip from 0
//     when, in addition, the largest representable value is within its upper
//     bound (plus half a step);
//   - every intermediate value has one reader and is no graph output.
// And Q(MaxPool(DQ(x))) with equal scales and zero points becomes MaxPool on
// the 8-bit x (exact: quantization is monotonic). A product left in float32
// (no QuantizeLinear after it), Gemm(DQ(x), DQ(w), C) with alpha and beta 1
// and no transA, or MatMul(DQ(x), DQ(w)), w a constant 2-D 8-bit tensor with
// a scale per tensor or per output column, becomes MatMulInteger(x_q, w_q,
// x_zp, w_zp) -> Cast(float) -> Mul(x_scale * w_scale) [-> Add(C)]: exact
// int32 accumulation, scaled once (float rounding apart, what the QDQ means).
// Needs: nothing (runs on the graph as imported, before constant folding,
// which would turn DequantizeLinear(w_q) into float weights). Keeps: graph
// inputs and outputs, node names (the new node takes the Conv's / MatMul's).
#pragma once
#include <string>
#include <vector>

#include "ir/graph.h"

namespace tessera {

/// A node the pass removed, and the quantized node it became part of.
struct QdqFold {
  std::string node, op_type;  // the removed node (a QuantizeLinear, Relu or Clip)
  std::string into;           // the QLinearConv / QLinearMatMul (named as the Conv / MatMul was)
};

/// Returns the number of chains folded; `folds` (optional) receives the nodes removed.
int fold_qdq(Graph& graph, std::vector<QdqFold>* folds = nullptr);

}  // namespace tessera
