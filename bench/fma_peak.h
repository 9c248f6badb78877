// This machine's single-precision FMA peak, measured with register-only loops
// (no memory traffic). Shared by tessera_peak and the kernel benchmarks, which
// report their GFLOP/s as a fraction of it.
#pragma once
#include <string>
#include <vector>

namespace tessera::bench {

/// One vector width's FMA loop.
struct FmaIsa {
  const char* name;           // "avx512", "avx2" (float32 FMA) or "avx512_bf16" (bf16 dot products)
  bool supported;             // this CPU can run it
  double flop_per_iteration;  // FLOP one iteration of the loop performs
  float (*loop)(long iterations, float start);
};

/// The loops: float32 FMA widest first, then the bf16 dot product (check `supported`).
std::vector<FmaIsa> fma_isas();

struct PeakResult {
  double best_gflops = 0;    // the fastest repetition: the peak (noise only ever slows a repetition)
  double median_gflops = 0;
  /// The fastest repetition timed by each thread's CPU time instead of the
  /// wall clock: what the cores do while they run, less sensitive to other
  /// processes taking turns on the CPUs (a loaded, shared machine).
  double best_cpu_time_gflops = 0;
};

/// Runs `isa`'s loop on `threads` threads pinned to CPUs 0..threads-1, started
/// together, `reps` times, each repetition about `seconds` long; GFLOP/s of all
/// threads together, timed to the last thread's finish.
PeakResult measure_fma_peak(const FmaIsa& isa, int threads, int reps, double seconds);

/// The CPU's model name from /proc/cpuinfo ("unknown" when absent).
std::string cpu_model_name();

}  // namespace tessera::bench
