// The CLI's OpenMP wait policy (omp_wait_defaults.cc says why).
#pragma once

namespace tessera::cli {

/// Where the user set neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT: sets
/// GOMP_SPINCOUNT=1000 and runs this program again with the same arguments
/// (libgomp read its environment before main, and reads it only then). Returns
/// only when nothing was to be done or the new run could not start (which
/// leaves libgomp's default, a slower worst case but nothing wrong).
void apply_omp_wait_defaults(char** argv);

}  // namespace tessera::cli
