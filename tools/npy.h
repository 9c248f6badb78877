// Reading and writing numpy .npy files (format versions 1-3, little-endian,
// C order) for the CLI. The header is parsed strictly, as the Python literal
// numpy writes: a dict of exactly 'descr' (a string), 'fortran_order' (True or
// False) and 'shape' (a tuple of sizes), followed by padding only; the data
// must be exactly as long as the shape needs. Errors are thrown as
// std::runtime_error with the path.
//
// Unicode string arrays (numpy dtype str, descr '<U{n}'; '>U{n}' is read too)
// are read into NpyArray::strings as UTF-8, one string per element in row-major
// order, with numpy's trailing NUL padding dropped (NULs inside a string are
// kept); code points that are surrogates or above U+10FFFF are refused. They
// are written as '<U{m}', m the most code points of any element (at least 1, as
// numpy does). Object arrays ('|O', pickled) and byte strings ('|S{n}') are
// refused with a hint to save with dtype str.
#pragma once
#include <dlpack/dlpack.h>

#include "tessera/tessera.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::tools {

/// The dtype a string array carries: no model dtype equals it, so a string array given for a numeric
/// input fails the dtype check; dl_dtype_name calls it "str" and dl_dtype_size gives 0.
inline constexpr DLDataType kNpyStringDtype{TSR_DL_STRING_CODE, 8, 1};  // as the C API describes strings

struct NpyArray {
  DLDataType dtype{kDLFloat, 32, 1};  // numeric arrays only; kNpyStringDtype when is_string
  std::vector<int64_t> shape;
  std::vector<unsigned char> data;  // row-major bytes; empty when is_string
  /// A numpy str array: `strings` holds its elements (UTF-8, row-major, as many as the product of
  /// `shape`, so one for shape ()), `data` is empty and `dtype` means nothing (parse_npy and
  /// make_string_array set it to kNpyStringDtype).
  bool is_string = false;
  std::vector<std::string> strings;
  /// When encoding: a byte that is not part of valid UTF-8 becomes the code point U+DC80 + byte
  /// (Python's "surrogateescape": `s.encode("utf-8", "surrogateescape")` gives the bytes back)
  /// instead of an error. For outputs a model made, which may hold any bytes.
  bool escape_invalid_utf8 = false;
};

/// A string array; throws std::runtime_error when `strings` does not hold one string per element of
/// `shape` (negative sizes included). The strings are checked as UTF-8 only when encoded.
NpyArray make_string_array(std::vector<int64_t> shape, std::vector<std::string> strings);

/// Reads a .npy file (a regular file, or a pipe read to its end; not a directory).
NpyArray read_npy(const std::string& path);
/// Parses the bytes of a .npy file; `name` is used in error messages.
NpyArray parse_npy(const std::string& bytes, const std::string& name);
/// The bytes of a version-1 .npy file holding `array`; `name` is used in error messages. A string
/// array's elements must be valid UTF-8 (else std::runtime_error naming the element, unless
/// escape_invalid_utf8) and as many as its shape says.
std::string encode_npy(const NpyArray& array, const std::string& name);
/// Bytes per element of a DLPack dtype.
size_t dl_dtype_size(DLDataType dtype);
/// "float32", "int64", "bool", ... ("str" for kNpyStringDtype)
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
