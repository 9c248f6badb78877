// Element types of tensors, with their sizes and names.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

enum class DType : uint8_t {
  kUndefined = 0,
  kFloat32,
  kFloat16,
  kFloat64,
  kInt8,
  kInt16,
  kInt32,
  kInt64,
  kUInt8,
  kUInt16,
  kUInt32,
  kUInt64,
  kBool,
  kBFloat16,
  /// Text: each element is a std::string (UTF-8 bytes). Only the ops whose
  /// schema says so (OpSchema::strings) take or make string tensors, and
  /// only the native backend runs them; string tensors are never arena-
  /// planned or copied bytewise (Tensor constructs and copies the strings).
  kString,
};

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
/// Parses the names dtype_name() prints ("float32", "int64", ...). Undefined when unknown.
DType dtype_from_name(const std::string& name);
/// Maps an ONNX TensorProto.DataType code (the one ONNX numbering, used by
/// model files and by attributes such as Cast's `to`). Undefined for 0, for
/// codes Tessera has no dtype for (string, complex) and for unknown codes.
DType dtype_from_onnx_code(int64_t code);
/// "string (8)", "complex64 (14)", "float32 (1)", or "unknown (N)", for messages.
std::string onnx_dtype_code_name(int64_t code);

bool dtype_is_float(DType dtype);
bool dtype_is_integer(DType dtype);  // signed or unsigned, not bool
bool dtype_is_signed(DType dtype);

/// IEEE half <-> float conversions (round to nearest even).
float half_to_float(uint16_t half);
uint16_t float_to_half(float value);
float bfloat16_to_float(uint16_t value);
uint16_t float_to_bfloat16(float value);

}  // namespace tessera
