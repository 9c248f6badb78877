// Reading and writing numpy .npy files (format versions 1-3, little-endian,
// C order) for the CLI. Errors are thrown as std::runtime_error with the path.
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

NpyArray read_npy(const std::string& path);
/// Parses the bytes of a .npy file; `name` is used in error messages.
NpyArray parse_npy(const std::string& bytes, const std::string& name);
void write_npy(const std::string& path, const NpyArray& array);
/// Bytes per element of a DLPack dtype.
size_t dl_dtype_size(DLDataType dtype);
/// "float32", "int64", "bool", ...
std::string dl_dtype_name(DLDataType dtype);

}  // namespace tessera::tools
