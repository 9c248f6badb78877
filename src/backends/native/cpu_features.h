// The one place that reads the CPU's features for the native backend. Every
// ISA-specific kernel family chooses its implementation from these flags.
// TESSERA_ISA=baseline|avx2|avx512 (AVX-512 without VNNI) caps what is used (to test the fallbacks or to
// compare them); unset, the best the CPU has is used.
#pragma once

namespace tessera::native {

struct CpuFeatures {
  bool avx2_fma = false;  // AVX2, FMA3 and F16C (every AVX2 CPU has it): the *_avx2.cc files
  bool avx512 = false;    // AVX-512 F, BW, DQ and VL: the *_avx512.cc files
  bool avx512_vnni = false;  // and AVX512_VNNI (vpdpbusd): the *_avx512vnni.cc files
};

const CpuFeatures& cpu_features();

}  // namespace tessera::native
