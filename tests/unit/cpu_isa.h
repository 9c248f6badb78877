// What this CPU implies for a test, found independently of the code under
// test: the flags in /proc/cpuinfo, lowered by oneDNN's ONEDNN_MAX_CPU_ISA /
// DNNL_MAX_CPU_ISA cap (the same reading as tests/lib/cpu_isa.py). Tests
// assert the behaviour the CPU (as capped) must show, on every CPU, instead
// of failing or skipping where a feature is missing.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

namespace tessera::testing::cpu_isa {

inline std::set<std::string> cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::set<std::string> flags;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

/// oneDNN's ISA values (dnnl_types.h) are nested bit sets: a cap allows an ISA when cap & isa == isa.
inline uint32_t dnnl_cap() {
  for (const char* name : {"ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    std::string s(v);
    for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (s == "SSE41") return 0x1;
    if (s == "AVX") return 0x3;
    if (s == "AVX2") return 0x7;
    if (s == "AVX2_VNNI") return 0x407;
    if (s == "AVX512_CORE") return 0x27;
    if (s == "AVX512_CORE_VNNI") return 0x67;
    if (s == "AVX512_CORE_BF16") return 0xE7;
    if (s == "AVX512_CORE_AMX") return 0x3E7;
  }
  return 0xFFFFFFFFu;
}

inline bool dnnl_allows(uint32_t isa) { return (dnnl_cap() & isa) == isa; }

/// oneDNN may use AVX2 (the CPU has it and no cap forbids it).
inline bool dnnl_avx2() { return dnnl_allows(0x7) && cpu_flags().count("avx2"); }

inline bool dnnl_avx512() {
  const auto f = cpu_flags();
  return dnnl_allows(0x27) && f.count("avx512f") && f.count("avx512bw") && f.count("avx512vl") && f.count("avx512dq");
}

/// oneDNN computes bf16 natively (AVX512_BF16).
inline bool dnnl_bf16() { return dnnl_avx512() && cpu_flags().count("avx512_bf16") && dnnl_allows(0xE7); }

/// oneDNN's int8 kernels accumulate 8-bit products in int32 (VNNI).
inline bool dnnl_int8_exact() {
  const auto f = cpu_flags();
  return (dnnl_avx512() && f.count("avx512_vnni") && dnnl_allows(0x67)) || (f.count("avx_vnni") && dnnl_allows(0x407));
}

/// Tessera's own kernels may use AVX512_VNNI: the CPU has it with AVX-512 F, BW, DQ and VL (and
/// AVX2 + FMA), and TESSERA_ISA (baseline, avx2, avx512: AVX-512 without VNNI) does not cap it.
inline bool native_avx512_vnni() {
  const auto f = cpu_flags();
  for (const char* flag : {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512_vnni"}) {
    if (!f.count(flag)) return false;
  }
  const char* cap = std::getenv("TESSERA_ISA");
  return !cap || (std::string(cap) != "baseline" && std::string(cap) != "avx2" && std::string(cap) != "avx512");
}

}  // namespace tessera::testing::cpu_isa
