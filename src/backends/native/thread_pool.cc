// The native backend's parallel_for on a process-wide set of helper threads.
//
// Contract: the calling thread always works and never waits for a helper that has not started:
// a helper that wakes after the caller has claimed every chunk finds nothing to do, and the
// caller returns as soon as the chunks that were claimed are done. With OpenMP's fork-join (what
// this file used before) the caller waited at the region's end for every thread of its team to
// arrive, so on a VM where waking an idle vCPU took 0.1-1.8 ms a 26 µs ReduceMean took 0.26 ms
// at 2 threads. Helpers spin for about 20 µs after their last job, then sleep on a condition
// variable; sleeping, they take no core from oneDNN's OpenMP team or a neighbour process. While a
// WarmScope lives (a native region's run) they spin up to 1 ms instead: a BERT-shaped encoder's
// native steps came with gaps over 20 µs between them (shape arithmetic, small nodes run inline),
// and 35-60% of its parallel_for calls found the helper asleep. A warm helper yields its core every
// 50 µs and sleeps as soon as a yield hands the core to another thread, and a scope whose thread
// was preempted since its last scope is not warm, so a neighbour on the cores is not spun against.
#include "backends/native/thread_pool.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>

#include <sys/resource.h>

#include "ir/thread_support.h"

namespace tessera::native {
namespace {

/// One parallel_for call's work; it lives on its caller's stack.
struct Job {
  FunctionRef<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunk = 0, num_chunks = 0;
  std::atomic<int64_t> next{0};
  /// Helpers inside run_chunks (a helper's decrement is its last touch of the job).
  std::atomic<int> active{0};
  int helpers_wanted = 0;  // team size - 1
  bool large = false;      // wake sleeping helpers before the first chunk
  int helpers_joined = 0;  // guarded by Workers::mutex_
  std::mutex error_mutex;
  std::exception_ptr error;
};

/// Set while a thread runs chunks: a parallel_for inside one runs inline.
thread_local bool in_job = false;

/// Runs chunk c of `job` on this thread.
void run_chunk(Job& job, int64_t c) {
  in_job = true;
  const int64_t begin = c * job.chunk;
  try {
    (*job.fn)(begin, std::min(job.n, begin + job.chunk));
  } catch (...) {
    std::lock_guard<std::mutex> lock(job.error_mutex);
    if (!job.error) job.error = std::current_exception();
  }
  in_job = false;
}

/// Runs the chunks of `job` that no thread has claimed yet.
void run_chunks(Job& job) {
  for (;;) {
    const int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
    if (c >= job.num_chunks) break;
    run_chunk(job, c);
  }
}

/// A sleeping helper is woken only for more than this much work left (see Workers::run).
constexpr double kWakeWorthMicroseconds = 50;
/// How long a helper spins for the next job before it sleeps: outside any WarmScope, and inside one.
constexpr auto kColdSpin = std::chrono::microseconds(20);
constexpr auto kWarmSpin = std::chrono::microseconds(1000);
/// Inside a WarmScope a spinning helper yields its core this often; a yield that returns later than
/// kYieldTaken gave the core to another thread, and the helper then sleeps.
constexpr auto kWarmYieldEvery = std::chrono::microseconds(50);
constexpr auto kYieldTaken = std::chrono::microseconds(20);

class Workers {
 public:
  /// The process's helpers (a child of fork starts a new set: its parent's threads are not in it).
  static Workers& get() { return process_singleton<Workers>(); }

  /// Runs `job` with up to job.helpers_wanted helpers besides the calling thread.
  void run(Job& job) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (static_cast<int>(threads_) < job.helpers_wanted) {
        try {
          std::thread(&Workers::loop, this).detach();
        } catch (const std::system_error&) {
          break;  // no more threads for this process: fewer helpers
        }
        ++threads_;
      }
      job.helpers_wanted = std::min(job.helpers_wanted, static_cast<int>(threads_));
      if (job.helpers_wanted > 0) {
        open_.push_back(&job);
        open_count_.store(open_.size(), std::memory_order_release);
      }
    }
    // Waking a sleeping helper costs the caller a system call (20-25 µs on this project's VMs, where it
    // interrupts a halted vCPU): worth it only for a job whose other chunks take longer than that. So
    // where a helper sleeps, the caller first runs a chunk and times it.
    if (job.helpers_wanted > 0 && job.large && sleepers_.load(std::memory_order_acquire) > 0) {
      // Known to be worth it: timing a first chunk would leave a late helper few chunks or none (a
      // 256 x 128 x 512 MatMul in 4 chunks ran 0.25-0.32 ms on 2 threads against 0.30 on one).
      wake_for(job);
    } else if (job.helpers_wanted > 0 && sleepers_.load(std::memory_order_acquire) > 0) {
      const int64_t c = job.next.fetch_add(1, std::memory_order_relaxed);
      if (c < job.num_chunks) {
        const auto start = std::chrono::steady_clock::now();
        run_chunk(job, c);
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
        const int64_t left = job.num_chunks - job.next.load(std::memory_order_relaxed);
        if (left > 0 && us * static_cast<double>(left) > kWakeWorthMicroseconds) wake_for(job);
      }
    }
    run_chunks(job);
    // Every chunk is claimed: no helper may join any more; wait only for those inside it.
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = std::find(open_.begin(), open_.end(), &job);
      if (it != open_.end()) open_.erase(it);
      open_count_.store(open_.size(), std::memory_order_release);
    }
    for (int spins = 0; job.active.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < 4096) {
        cpu_relax();
      } else {
        std::this_thread::yield();  // a helper without a core: give it this one
      }
    }
  }

  void enter_warm() { warm_.fetch_add(1, std::memory_order_acq_rel); }
  void leave_warm() { warm_.fetch_sub(1, std::memory_order_acq_rel); }

 private:
  /// Spins until a job is open or the spin runs out: kColdSpin, or kWarmSpin while a WarmScope lives
  /// (yielding now and then, and ending at a yield that another thread took the core for).
  void spin_for_a_job() const {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    Clock::time_point yield_at = start + kWarmYieldEvery;
    for (int i = 0; open_count_.load(std::memory_order_acquire) == 0; ++i) {
      cpu_relax();
      if ((i & 63) != 63) continue;
      const Clock::time_point now = Clock::now();
      const bool warm = warm_.load(std::memory_order_relaxed) > 0;
      if (now - start > (warm ? kWarmSpin : kColdSpin)) return;
      if (warm && now > yield_at) {
        std::this_thread::yield();
        const Clock::time_point back = Clock::now();
        if (back - now > kYieldTaken) return;
        yield_at = back + kWarmYieldEvery;
      }
    }
  }

  /// Wakes as many sleeping helpers as `job` wants.
  void wake_for(const Job& job) {
    if (job.helpers_wanted == 1) {
      wake_.notify_one();
    } else {
      wake_.notify_all();
    }
  }

  void loop() {
    for (;;) {
      spin_for_a_job();
      Job* job = nullptr;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        if (open_.empty()) {
          sleepers_.fetch_add(1, std::memory_order_acq_rel);
          wake_.wait(lock, [&] { return !open_.empty(); });
          sleepers_.fetch_sub(1, std::memory_order_acq_rel);
        }
        job = open_.front();
        job->active.fetch_add(1, std::memory_order_relaxed);
        if (++job->helpers_joined >= job->helpers_wanted) {
          open_.pop_front();
          open_count_.store(open_.size(), std::memory_order_release);
        }
      }
      run_chunks(*job);
      job->active.fetch_sub(1, std::memory_order_release);  // the last touch of the job
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job*> open_;  // jobs that may take another helper
  std::atomic<size_t> open_count_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<int> warm_{0};  // WarmScopes alive
  size_t threads_ = 0;
};

}  // namespace

ThreadPool::WarmScope::WarmScope(const ThreadPool& pool) : warm_(pool.num_threads() > 1) {
  if (!warm_) return;
  // Preempted since this thread's last scope: something else wants these cores; no spinning against it.
  thread_local long last_preempted = -1;
  rusage usage{};
  if (getrusage(RUSAGE_THREAD, &usage) == 0) {
    const bool preempted = last_preempted >= 0 && usage.ru_nivcsw != last_preempted;
    last_preempted = usage.ru_nivcsw;
    if (preempted) {
      warm_ = false;
      return;
    }
  }
  Workers::get().enter_warm();
}

ThreadPool::WarmScope::~WarmScope() {
  if (warm_) Workers::get().leave_warm();
}

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {}

void ThreadPool::parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn, bool large) const {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  const int64_t max_chunks = (n + grain - 1) / grain;
  const int64_t wanted = std::min<int64_t>(max_chunks, static_cast<int64_t>(num_threads_) * 4);
  if (num_threads_ == 1 || wanted <= 1 || in_job || omp_in_parallel()) {
    fn(0, n);
    return;
  }
  Job job;
  job.fn = &fn;
  job.n = n;
  job.chunk = (n + wanted - 1) / wanted;
  job.num_chunks = (n + job.chunk - 1) / job.chunk;
  job.helpers_wanted = static_cast<int>(std::min<int64_t>(num_threads_, job.num_chunks)) - 1;
  job.large = large;
  Workers::get().run(job);
  if (job.error) std::rethrow_exception(job.error);
}

}  // namespace tessera::native
