// Register-only FMA loops, one thread per CPU pinned to CPUs 0..T-1.
//   avx512: vfmadd231ps zmm, 16 lanes x 2 FLOP = 32 FLOP an instruction
//   avx2:   vfmadd231ps ymm,  8 lanes x 2 FLOP = 16 FLOP an instruction
//   avx512_bf16: vdpbf16ps zmm, 16 lanes x 2 products x 2 FLOP = 64 FLOP an
//           instruction (bf16 pairs multiplied and added into float32 lanes)
//   avx512_vnni: vpdpbusd zmm, 16 lanes x 4 products x 2 OP = 128 integer OP
//           an instruction (u8 x s8 quadruples added into int32 lanes)
// Each loop keeps more independent accumulator chains than FMA latency x FMA
// ports (4 cycles x 2 on current x86 cores), so throughput, not latency, bounds
// it. The ISA is chosen per function (target attributes) and only called when
// the CPU reports it, so this file needs no ISA flags of its own.
#include "fma_peak.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>
#include <ctime>

namespace tessera::bench {
namespace {

// 16 zmm chains leave 16 registers free; AVX2 has 16 ymm registers in all, so
// 12 chains plus the two operands.
constexpr int kChainsAvx512 = 16;
constexpr int kChainsAvx2 = 12;

/// The sum of every lane of the chains: a value that depends on each of them.
__attribute__((target("avx512f"))) inline float sum_of_chains(const __m512* chain) {
  __m512 sum = chain[0];
#pragma GCC unroll 16
  for (int c = 1; c < kChainsAvx512; ++c) sum = _mm512_add_ps(sum, chain[c]);
  float lanes[16];
  _mm512_storeu_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

/// `iterations` x kChainsAvx512 FMAs on zmm registers. Returns a value that
/// depends on every chain, so none can be optimised away.
__attribute__((target("avx512f"), noinline)) float fma_loop_avx512(long iterations, float start) {
  const __m512 scale = _mm512_set1_ps(0.9999999f);
  const __m512 offset = _mm512_set1_ps(1e-8f);
  __m512 chain[kChainsAvx512];
#pragma GCC unroll 16
  for (int c = 0; c < kChainsAvx512; ++c) chain[c] = _mm512_set1_ps(start + static_cast<float>(c));
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChainsAvx512; ++c) chain[c] = _mm512_fmadd_ps(chain[c], scale, offset);
  }
  return sum_of_chains(chain);
}

/// `iterations` x kChainsAvx512 bf16 dot-product instructions (vdpbf16ps).
__attribute__((target("avx512f,avx512bf16"), noinline)) float dpbf16_loop_avx512(long iterations, float start) {
  // Small bf16 operands keep the float32 accumulators finite for any run length.
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(-1e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(1e-3f));
  __m512 chain[kChainsAvx512];
#pragma GCC unroll 16
  for (int c = 0; c < kChainsAvx512; ++c) chain[c] = _mm512_set1_ps(start + static_cast<float>(c));
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 16
    for (int c = 0; c < kChainsAvx512; ++c) chain[c] = _mm512_dpbf16_ps(chain[c], a, b);
  }
  return sum_of_chains(chain);
}

/// `iterations` x 16 int8 dot-product instructions (vpdpbusd) on 16 accumulators.
__attribute__((target("avx512f,avx512vnni"), noinline)) float dpbusd_loop_avx512(long iterations, float start) {
  static_assert(kChainsAvx512 == 16, "the loop below names its 16 accumulators");
  // Products of 1 x 1 add 4 an instruction: int32 lanes wrap only after 2^29 instructions. As inline
  // assembly on named accumulators: written with the intrinsic, gcc 12 copies every accumulator between
  // registers each iteration, and the copies take the vector ports (669 instead of ~900 GOP/s).
  const __m512i a = _mm512_set1_epi8(1);
  const __m512i b = _mm512_set1_epi8(1);
  const int s = static_cast<int>(start);
  __m512i c0 = _mm512_set1_epi32(s), c1 = _mm512_set1_epi32(s + 1), c2 = _mm512_set1_epi32(s + 2),
          c3 = _mm512_set1_epi32(s + 3), c4 = _mm512_set1_epi32(s + 4), c5 = _mm512_set1_epi32(s + 5),
          c6 = _mm512_set1_epi32(s + 6), c7 = _mm512_set1_epi32(s + 7), c8 = _mm512_set1_epi32(s + 8),
          c9 = _mm512_set1_epi32(s + 9), c10 = _mm512_set1_epi32(s + 10), c11 = _mm512_set1_epi32(s + 11),
          c12 = _mm512_set1_epi32(s + 12), c13 = _mm512_set1_epi32(s + 13), c14 = _mm512_set1_epi32(s + 14),
          c15 = _mm512_set1_epi32(s + 15);
  for (long i = 0; i < iterations; ++i) {
    asm("vpdpbusd %8, %9, %0\n\tvpdpbusd %8, %9, %1\n\tvpdpbusd %8, %9, %2\n\tvpdpbusd %8, %9, %3\n\t"
        "vpdpbusd %8, %9, %4\n\tvpdpbusd %8, %9, %5\n\tvpdpbusd %8, %9, %6\n\tvpdpbusd %8, %9, %7"
        : "+v"(c0), "+v"(c1), "+v"(c2), "+v"(c3), "+v"(c4), "+v"(c5), "+v"(c6), "+v"(c7)
        : "v"(b), "v"(a));
    asm("vpdpbusd %8, %9, %0\n\tvpdpbusd %8, %9, %1\n\tvpdpbusd %8, %9, %2\n\tvpdpbusd %8, %9, %3\n\t"
        "vpdpbusd %8, %9, %4\n\tvpdpbusd %8, %9, %5\n\tvpdpbusd %8, %9, %6\n\tvpdpbusd %8, %9, %7"
        : "+v"(c8), "+v"(c9), "+v"(c10), "+v"(c11), "+v"(c12), "+v"(c13), "+v"(c14), "+v"(c15)
        : "v"(b), "v"(a));
  }
  const __m512i sum = _mm512_add_epi32(
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                       _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7))),
      _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)),
                       _mm512_add_epi32(_mm512_add_epi32(c12, c13), _mm512_add_epi32(c14, c15))));
  return static_cast<float>(_mm512_reduce_add_epi32(sum));
}

__attribute__((target("avx2,fma"), noinline)) float fma_loop_avx2(long iterations, float start) {
  const __m256 scale = _mm256_set1_ps(0.9999999f);
  const __m256 offset = _mm256_set1_ps(1e-8f);
  __m256 chain[kChainsAvx2];
#pragma GCC unroll 12
  for (int c = 0; c < kChainsAvx2; ++c) chain[c] = _mm256_set1_ps(start + static_cast<float>(c));
  for (long i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (int c = 0; c < kChainsAvx2; ++c) chain[c] = _mm256_fmadd_ps(chain[c], scale, offset);
  }
  __m256 sum = chain[0];
#pragma GCC unroll 12
  for (int c = 1; c < kChainsAvx2; ++c) sum = _mm256_add_ps(sum, chain[c]);
  float lanes[8];
  _mm256_storeu_ps(lanes, sum);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort: unpinned still measures
}

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Rate {
  double wall_gflops;
  double cpu_time_gflops;
};

/// GFLOP/s of `threads` threads each running `iterations` of the loop, started together.
Rate run_once(const FmaIsa& isa, int threads, long iterations) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> elapsed(static_cast<size_t>(threads)), cpu(static_cast<size_t>(threads));
  std::vector<float> sink(static_cast<size_t>(threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      pin_to_cpu(t);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      const auto t0 = std::chrono::steady_clock::now();
      const double cpu0 = thread_cpu_seconds();
      sink[static_cast<size_t>(t)] = isa.loop(iterations, static_cast<float>(t));
      cpu[static_cast<size_t>(t)] = thread_cpu_seconds() - cpu0;
      elapsed[static_cast<size_t>(t)] = seconds_since(t0);
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  go.store(true, std::memory_order_release);
  for (std::thread& w : workers) w.join();
  volatile float keep = sink[0];
  (void)keep;
  const double flop = isa.flop_per_iteration * static_cast<double>(iterations);
  double cpu_rate = 0;
  for (double seconds : cpu) cpu_rate += flop / std::max(seconds, 1e-9);
  return {flop * threads / *std::max_element(elapsed.begin(), elapsed.end()) * 1e-9, cpu_rate * 1e-9};
}

}  // namespace

std::vector<FmaIsa> fma_isas() {
  __builtin_cpu_init();
  return {
      {"avx512", __builtin_cpu_supports("avx512f") != 0, 32.0 * kChainsAvx512, fma_loop_avx512},
      {"avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), 16.0 * kChainsAvx2, fma_loop_avx2},
      // Last, so that "the first supported" stays the float32 peak.
      {"avx512_bf16", __builtin_cpu_supports("avx512bf16") != 0, 64.0 * kChainsAvx512, dpbf16_loop_avx512},
      {"avx512_vnni", __builtin_cpu_supports("avx512vnni") != 0, 128.0 * kChainsAvx512, dpbusd_loop_avx512},
  };
}

PeakResult measure_fma_peak(const FmaIsa& isa, int threads, int reps, double seconds) {
  // Size the loop so one repetition takes about `seconds` on one thread.
  long iterations = 1 << 16;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    volatile float keep = isa.loop(iterations, 1.0f);
    (void)keep;
    const double took = seconds_since(t0);
    if (took >= seconds / 4) {
      iterations = std::max(1L, static_cast<long>(static_cast<double>(iterations) * seconds / took));
      break;
    }
    iterations *= 4;
  }
  std::vector<double> gflops;
  double best_cpu_time = 0;
  for (int r = 0; r < std::max(1, reps); ++r) {
    const Rate rate = run_once(isa, threads, iterations);
    gflops.push_back(rate.wall_gflops);
    best_cpu_time = std::max(best_cpu_time, rate.cpu_time_gflops);
  }
  std::sort(gflops.begin(), gflops.end());
  return {gflops.back(), gflops[gflops.size() / 2], best_cpu_time};
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

}  // namespace tessera::bench
