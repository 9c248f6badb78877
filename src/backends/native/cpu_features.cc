#include "backends/native/cpu_features.h"

#include <cstdlib>
#include <string>

namespace tessera::native {

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    __builtin_cpu_init();
    CpuFeatures f;
    f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    f.avx512 = f.avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    if (const char* cap = std::getenv("TESSERA_ISA")) {
      const std::string isa = cap;
      if (isa == "baseline") f = CpuFeatures{};
      if (isa == "avx2") f.avx512 = false;
    }
    return f;
  }();
  return features;
}

}  // namespace tessera::native
