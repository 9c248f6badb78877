#include "backends/native/cpu_features.h"

#include <cpuid.h>

#include <cstdlib>
#include <string>

namespace tessera::native {
namespace {

/// F16C (CPUID leaf 1, ECX bit 29): read directly, since clang's __builtin_cpu_supports has no name for it.
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && ((ecx >> 29) & 1u) != 0;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = [] {
    __builtin_cpu_init();
    CpuFeatures f;
    f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    f.avx512 = f.avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    f.avx512_vnni = f.avx512 && __builtin_cpu_supports("avx512vnni");
    if (const char* cap = std::getenv("TESSERA_ISA")) {
      const std::string isa = cap;
      if (isa == "baseline") f = CpuFeatures{};
      if (isa == "avx2") f.avx512 = f.avx512_vnni = false;
      if (isa == "avx512") f.avx512_vnni = false;
    }
    return f;
  }();
  return features;
}

}  // namespace tessera::native
