// tessera_peak: this machine's single-precision FMA peak, measured (see
// fma_peak.h): register-only AVX-512 and AVX2 FMA loops (and AVX512_BF16 dot
// products, vdpbf16ps, where the CPU has them) on 1..T threads pinned
// to CPUs 0..T-1, best and median of --reps repetitions.
//
//   build/bench/tessera_peak [--threads 1,2] [--reps 7] [--seconds 0.2] [--json]
//
// "per CPU-second" times each thread by its own CPU time: on a machine shared
// with other work it still shows what the cores reach while they run.
// --json prints one object: {"cpu", "cpus", "reps", "results": [{"isa", "threads",
// "gflops_best", "gflops_median", "gflops_best_cpu_time"}]}; bench/run_bench.py reads it to report each
// model's figure as a fraction of the peak.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "fma_peak.h"

namespace {

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: tessera_peak [--threads 1,2] [--reps 7] [--seconds 0.2] [--json]\n");
  std::exit(2);
}

std::vector<int> parse_counts(const char* text) {
  std::vector<int> counts;
  for (const char* p = text; *p;) {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p || v < 1 || v > 1024 || (*end && *end != ',')) usage();
    counts.push_back(static_cast<int>(v));
    p = *end ? end + 1 : end;
  }
  if (counts.empty()) usage();
  return counts;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> thread_counts = {1, 2};
  int reps = 7;
  double seconds = 0.2;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      json = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      thread_counts = parse_counts(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--seconds" && i + 1 < argc) {
      seconds = std::max(0.001, std::atof(argv[++i]));
    } else {
      usage();
    }
  }
  const unsigned cpus = std::thread::hardware_concurrency();
  std::string cpu = tessera::bench::cpu_model_name();
  std::replace(cpu.begin(), cpu.end(), '"', '\'');
  if (!json) {
    std::printf("%-11s %7s %12s %14s %18s   (%s, %u CPUs, best of %d)\n", "isa", "threads", "GFLOP/s best",
                "GFLOP/s median", "per CPU-second", cpu.c_str(), cpus, reps);
  }
  std::string results;
  for (const tessera::bench::FmaIsa& isa : tessera::bench::fma_isas()) {
    if (!isa.supported) continue;
    for (int threads : thread_counts) {
      const tessera::bench::PeakResult r = tessera::bench::measure_fma_peak(isa, threads, reps, seconds);
      if (json) {
        char row[256];
        std::snprintf(row, sizeof(row),
                      "%s{\"isa\": \"%s\", \"threads\": %d, \"gflops_best\": %.1f, \"gflops_median\": %.1f, "
                      "\"gflops_best_cpu_time\": %.1f}",
                      results.empty() ? "" : ", ", isa.name, threads, r.best_gflops, r.median_gflops,
                      r.best_cpu_time_gflops);
        results += row;
      } else {
        std::printf("%-11s %7d %12.1f %14.1f %18.1f\n", isa.name, threads, r.best_gflops, r.median_gflops,
                    r.best_cpu_time_gflops);
      }
    }
  }
  if (json) {
    std::printf("{\"cpu\": \"%s\", \"cpus\": %u, \"reps\": %d, \"results\": [%s]}\n", cpu.c_str(), cpus, reps,
                results.c_str());
  }
  return 0;
}
