#include "backends/native/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TESSERA_CPU_RELAX() _mm_pause()
#else
#define TESSERA_CPU_RELAX() ((void)0)
#endif

namespace tessera::native {
namespace {

// Workers and waiting callers spin this long before sleeping: kernels issue
// parallel_for back to back (a GEMM does two per K block), and waking a
// sleeping thread costs tens of microseconds, more than many whole loops.
constexpr auto kSpinTime = std::chrono::microseconds(200);

}  // namespace

struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 1;
  int64_t num_chunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> done{0};
  std::mutex mutex;
  std::condition_variable finished;
  std::exception_ptr error;
};

ThreadPool::ThreadPool(int num_threads)
    : num_threads_(std::max(1, num_threads)),
      // Spinning only pays when every thread has a core; oversubscribed, it steals time from the working ones.
      spin_(static_cast<unsigned>(num_threads_) <= std::max(1u, std::thread::hardware_concurrency())) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    stopping_flag_.store(true);
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::run_chunks(Job& job) {
  for (;;) {
    int64_t c = job.next.fetch_add(1);
    if (c >= job.num_chunks) return;
    int64_t begin = c * job.chunk;
    int64_t end = std::min(job.n, begin + job.chunk);
    try {
      (*job.fn)(begin, end);
    } catch (...) {
      std::lock_guard<std::mutex> lock(job.mutex);
      if (!job.error) job.error = std::current_exception();
    }
    if (job.done.fetch_add(1) + 1 == job.num_chunks) {
      std::lock_guard<std::mutex> lock(job.mutex);
      job.finished.notify_all();
    }
  }
}

void ThreadPool::worker_loop() {
  for (;;) {
    // Spin a little while for the next job before sleeping on the condition variable.
    const auto spin_until = std::chrono::steady_clock::now() + (spin_ ? kSpinTime : std::chrono::microseconds(0));
    while (pending_.load(std::memory_order_acquire) == 0 && !stopping_flag_.load(std::memory_order_relaxed) &&
           std::chrono::steady_clock::now() < spin_until) {
      for (int i = 0; i < 64; ++i) TESSERA_CPU_RELAX();
    }
    std::shared_ptr<Job> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = queue_.front();
      if (job->next.load() >= job->num_chunks) {
        queue_.pop_front();
        pending_.fetch_sub(1, std::memory_order_release);
        continue;
      }
    }
    run_chunks(*job);
  }
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  int64_t max_chunks = (n + grain - 1) / grain;
  int64_t num_chunks = std::min<int64_t>(max_chunks, static_cast<int64_t>(num_threads_) * 4);
  if (num_threads_ == 1 || num_chunks <= 1) {
    fn(0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->fn = &fn;
  job->n = n;
  job->chunk = (n + num_chunks - 1) / num_chunks;
  job->num_chunks = (n + job->chunk - 1) / job->chunk;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(job);
    pending_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  run_chunks(*job);
  // Spin briefly for the other threads' last chunks, then sleep.
  const auto spin_until = std::chrono::steady_clock::now() + (spin_ ? kSpinTime : std::chrono::microseconds(0));
  while (job->done.load(std::memory_order_acquire) != job->num_chunks && std::chrono::steady_clock::now() < spin_until) {
    for (int i = 0; i < 16; ++i) TESSERA_CPU_RELAX();
  }
  {
    std::unique_lock<std::mutex> lock(job->mutex);
    job->finished.wait(lock, [&] { return job->done.load() == job->num_chunks; });
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (*it == job) {
        queue_.erase(it);
        pending_.fetch_sub(1, std::memory_order_release);
        break;
      }
    }
  }
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace tessera::native
