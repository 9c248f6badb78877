// Writes a QDQ-quantized copy of an ONNX model (the format `tessera quantize`
// produces and ONNX Runtime, TensorRT and Tessera all read).
//
// Contract: the plan (which tensors, with which scales) is decided elsewhere
// (src/quantize/); this file only edits the model's protobuf. Every name it
// adds is new to the graph. For an activation tensor T the writer inserts
//   T -> QuantizeLinear(T_scale, T_zero_point) -> T_quantized -> DequantizeLinear -> T_dequantized
// and every node of the main graph that read T reads T_dequantized instead
// (graph outputs stay T, float). For a weight W it stores W_quantized (int8 or
// int32 for biases) with W_scale / W_zero_point and a DequantizeLinear whose
// output replaces W in the planned consumers; W itself is dropped when
// nothing reads it any more. Opsets below 10 have no QuantizeLinear: a user
// error; per-channel parameters need opset 13 (a user error below it).
// No protobuf type appears in this header.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/tensor.h"

namespace tessera::onnx_frontend {

struct QdqActivation {
  std::string tensor;
  float scale = 1.0f;
  int32_t zero_point = 0;
  bool is_signed = false;  // int8 when true, uint8 otherwise
};

/// A constant replaced by its quantized form (int8 weights, int32 biases).
struct QdqConstant {
  std::string tensor;           // the initializer (or Constant output) now replaced
  Tensor quantized;             // int8 or int32, the constant's shape
  std::vector<float> scales;    // one (per tensor) or one per slice along axis
  int64_t axis = -1;            // -1: per tensor
  /// The consumers whose input is replaced, each named by its first output
  /// (unique in ONNX, unlike node names, which may be empty).
  std::vector<std::string> consumers;
};

struct QdqPlan {
  std::vector<QdqActivation> activations;
  std::vector<QdqConstant> constants;
};

/// Reads the model at `input_path`, applies `plan` and returns the new
/// model's bytes, to be written at `output_path` (a model that keeps tensors
/// in external data files must be written into the same folder, where the
/// references still lead: a user error otherwise).
std::string make_qdq_model(const std::string& input_path, const std::string& output_path, const QdqPlan& plan);

}  // namespace tessera::onnx_frontend
