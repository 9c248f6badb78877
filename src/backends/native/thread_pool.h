// The native backend's intra-op thread pool. One pool per session, sized by
// --threads; parallel_for may be called from several threads at once (several
// concurrent runs of one model), and the calling thread always takes part.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::native {

class ThreadPool {
 public:
  /// num_threads counts the caller: 1 means no worker threads.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  /// Calls fn(begin, end) over [0, n) split into chunks of at least `grain`
  /// items. Returns when all chunks are done; rethrows the first exception.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Job;
  void worker_loop();
  static void run_chunks(Job& job);

  int num_threads_;
  bool spin_;  // wait actively for a little while before sleeping (not when oversubscribed)
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;  // guarded by mutex_
  bool stopping_ = false;                   // guarded by mutex_
  std::atomic<int64_t> pending_{0};         // queue_.size(), readable without the lock (spinning)
  std::atomic<bool> stopping_flag_{false};
};

}  // namespace tessera::native
