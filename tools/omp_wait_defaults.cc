// The CLI's OpenMP wait policy. oneDNN's threads and native's are one OpenMP
// team (GNU libgomp, which Debian's oneDNN is built on). By default libgomp's
// idle and waiting threads spin for about 300,000 iterations (milliseconds)
// before they sleep. When two of a run's threads share a CPU (another process
// holds the other cores, or the VM's vCPUs are contended), the spinning one
// keeps the other off that CPU until the scheduler's time slice ends, at every
// parallel step: runs of a 2 ms model took 150-300 ms, a 5 ms int8 MobileNetV2
// 430-490 ms (issue 22). A short spin (GOMP_SPINCOUNT=1000, a few
// microseconds) keeps the quiet case as fast and bounds the other
// (tests/python/test_thread_stress.py measures both).
//
// libgomp reads its environment once, in its initializer, before main; glibc
// resets the environment after an executable's .preinit_array runs, so the
// only way to set it for this process is to run the program again with it.
// Python sets the same default in tessera/__init__.py before it loads the
// library. A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is left alone.
#include "omp_wait_defaults.h"

#include <unistd.h>

#include <cstdlib>

namespace tessera::cli {

void apply_omp_wait_defaults(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (setenv("GOMP_SPINCOUNT", "1000", 1) != 0) return;
  execv("/proc/self/exe", argv);
  unsetenv("GOMP_SPINCOUNT");  // exec failed: this process keeps libgomp's default; say nothing of it
}

}  // namespace tessera::cli
