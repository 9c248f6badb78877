// libFuzzer target: arbitrary bytes as a .npy file must parse or throw
// std::runtime_error; never crash. What parses must survive a round trip:
// encoded again and parsed, it is the same array (string arrays included).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tessera::tools::NpyArray array;
  try {
    array = tessera::tools::parse_npy(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  } catch (const std::runtime_error&) {
    return 0;
  }
  std::string encoded;
  try {
    encoded = tessera::tools::encode_npy(array, "fuzz.npy");
  } catch (const std::runtime_error& e) {
    // A version 2 or 3 header can hold more dimensions than a version 1 header (which encode writes) has room for.
    if (std::string(e.what()).find("npy header too long") == std::string::npos) std::abort();
    return 0;
  }
  const tessera::tools::NpyArray back = tessera::tools::parse_npy(encoded, "fuzz.npy");  // not caught: it must parse
  if (back.is_string != array.is_string || back.shape != array.shape || back.data != array.data ||
      back.strings != array.strings || (!array.is_string && (back.dtype.code != array.dtype.code ||
                                                             back.dtype.bits != array.dtype.bits))) {
    std::abort();
  }
  return 0;
}
