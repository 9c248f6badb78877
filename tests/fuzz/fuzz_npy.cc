// libFuzzer target: arbitrary bytes as a .npy file must parse or throw
// std::runtime_error; never crash.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    tessera::tools::parse_npy(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  } catch (const std::runtime_error&) {
  }
  return 0;
}
