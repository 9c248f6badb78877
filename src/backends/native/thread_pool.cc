#include "backends/native/thread_pool.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>

namespace tessera::native {

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {}

void ThreadPool::parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) const {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t wanted = std::min<int64_t>(max_chunks, static_cast<int64_t>(num_threads_) * 4);
  if (num_threads_ == 1 || wanted <= 1 || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  const int64_t chunk = (n + wanted - 1) / wanted;
  const int64_t num_chunks = (n + chunk - 1) / chunk;
  std::atomic<int64_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  const int team = static_cast<int>(std::min<int64_t>(num_threads_, num_chunks));
#pragma omp parallel num_threads(team)
  {
    for (;;) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= num_chunks) break;
      const int64_t begin = c * chunk;
      try {
        fn(begin, std::min(n, begin + chunk));
      } catch (...) {  // no exception may leave an OpenMP region
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace tessera::native
