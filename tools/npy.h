// Reading and writing numpy .npy files (format versions 1-3, little-endian,
// C order) for the CLI. The header is parsed strictly, as the Python literal
// numpy writes: a dict of exactly 'descr' (a string), 'fortran_order' (True or
// False) and 'shape' (a tuple of sizes), followed by padding only; the data
// must be exactly as long as the shape needs. Errors are thrown as
// std::runtime_error with the path.
#pragma once
#include <dlpack/dlpack.h>

#include "tessera/tessera.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::tools {

struct NpyArray {
  DLDataType dtype{kDLFloat, 32, 1};
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;  // row-major bytes
};

/// Reads a .npy file (a regular file, or a pipe read to its end; not a directory).
NpyArray read_npy(const std::string& path);
/// Parses the bytes of a .npy file; `name` is used in error messages.
NpyArray parse_npy(const std::string& bytes, const std::string& name);
/// The bytes of a version-1 .npy file holding `array`; `name` is used in error messages.
std::string encode_npy(const NpyArray& array, const std::string& name);
/// Bytes per element of a DLPack dtype.
size_t dl_dtype_size(DLDataType dtype);
/// "float32", "int64", "bool", ...
std::string dl_dtype_name(DLDataType dtype);

// .npy has no bfloat16. The CLI's convention (README, "bfloat16 in .npy"):
//   - a bfloat16 model input reads a float32 file, rounded to nearest even (NaN stays NaN), or a uint16
//     file holding the values' bit patterns, exactly;
//   - a bfloat16 output is written as float32 (every bfloat16 value is exactly a float32), or, with
//     --bfloat16-bits, as uint16 bit patterns.
bool is_bfloat16(DLDataType dtype);
/// A bfloat16 array from a float32 (rounded) or uint16 (bit patterns) one; other dtypes throw.
NpyArray to_bfloat16(const NpyArray& array, const std::string& name);
/// A bfloat16 array widened to float32 (exact), or its bit patterns as uint16.
NpyArray from_bfloat16(const NpyArray& array, bool bits);
/// float32 -> bfloat16 bits, round to nearest even, NaN kept NaN (quiet).
uint16_t float_to_bfloat16_bits(float value);
float bfloat16_bits_to_float(uint16_t bits);

}  // namespace tessera::tools
