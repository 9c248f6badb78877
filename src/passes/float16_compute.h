// Models stored in float16 (what float16 converters and GPU-oriented
// exporters write) computed in float32.
//
// No backend has float16 kernels for most ops, and an x86 CPU without
// AVX512_FP16 computes float16 through float32 anyway, so this pass makes
// every float16 value of the graph float32: float16 constants become float32
// constants (exactly: every float16 is a float32), float16 intermediates
// float32, and the attributes that name a type (Cast's `to`, the `dtype` of
// EyeLike and the random ops, ConstantOfShape's `value`) name float32 instead
// of float16. Bodies of If, Loop and Scan are converted whole. The model's
// float16 inputs and outputs stay float16 for the caller: a Cast to float32
// follows each such input, a Cast to float16 makes each such output.
//
// What changes: values are rounded to float16 only where the model's inputs
// come in and its outputs go out, not after every op (ONNX Runtime's CPU
// provider rounds where it computes an op in float16): results are as close
// to the float64 reference as float32 computation makes them, within float16
// rounding of ONNX Runtime's.
//
// Needs: the graph as imported (before shape inference and constant folding),
// with its outputs' types declared (as ONNX's checker requires; a graph with
// an undeclared output type is left as it is).
// Keeps: graph inputs and outputs (names, types, order), node names.
#pragma once
#include "ir/graph.h"

namespace tessera {

/// Returns the number of float16 values and constants made float32 (0: the graph holds none).
int compute_float16_in_float32(Graph& graph);

}  // namespace tessera
