// oneDNN's OpenMP team and fork.
//
// Contract: once the oneDNN backend exists, a fork() in any thread first
// releases that thread's OpenMP team (omp_pause_resource_all, OpenMP 5.0), so
// the child starts without one and makes its own at its first parallel step.
// The parent's next parallel step starts a new team (a thread start, once per
// fork). A thread forking from inside a parallel region keeps its team (the
// call refuses there); nothing can help that child.
//
// Why: Debian's oneDNN runs on GNU libgomp, which keeps a thread's team from
// one parallel region to the next and has no fork handler. A child of fork has
// only the forking thread, but libgomp still counts the parent's team threads
// as its own: the child's first parallel step of two or more threads waited
// forever for them (a session run on 2 threads, then os.fork() and a run in
// the child: Python's multiprocessing "fork" start method, a pre-forking
// server). Threads other than the forking one are not in the child, so their
// teams never matter there. Where the process runs LLVM's libomp instead
// (the sanitizer build), that runtime handles fork itself and nothing is
// registered.
#include <dlfcn.h>
#include <omp.h>
#include <pthread.h>

#include <mutex>

#include "backends/dnnl/dnnl_internal.h"

namespace tessera::dnnl_backend {

void release_openmp_team_at_fork() {
  static std::once_flag once;
  std::call_once(once, [] {
    // LLVM's libomp (what a clang build with -fopenmp loads, and then serves oneDNN's GOMP_ calls too)
    // has fork handlers of its own, which make the child a new runtime; its omp_pause_resource_all
    // called from a prepare handler waited forever on one of its locks. Only libgomp needs this.
    if (dlsym(RTLD_DEFAULT, "__kmpc_fork_call") != nullptr) return;
    pthread_atfork([] { omp_pause_resource_all(omp_pause_hard); }, nullptr, nullptr);
  });
}

}  // namespace tessera::dnnl_backend
