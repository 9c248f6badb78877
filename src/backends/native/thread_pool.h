// The native backend's intra-op parallelism, sized by --threads: a process-wide
// set of helper threads (thread_pool.cc) that the calling thread works beside.
// The caller never waits for a helper that has not started (one that wakes
// late finds every chunk taken), so a small op at N threads costs what it
// costs on one when waking an idle core is slow (a VM whose idle vCPU halts:
// 0.1-1.8 ms). Helpers spin about 20 µs after a job, then sleep, so between
// native regions they take no core from oneDNN's OpenMP team (the threads of
// oneDNN's primitives) or a neighbour; inside a native region's run (a
// WarmScope) they spin up to 1 ms between its steps. parallel_for may be called from several
// threads at once (concurrent runs of one model share the helpers), and the
// calling thread always takes part.
#pragma once
#include <cstdint>
#include <type_traits>
#include <utility>

namespace tessera::native {

/// A non-owning reference to a callable, valid while the callable lives (a
/// parallel_for call): unlike std::function, building one from a lambda of
/// several captures allocates nothing (each parallel_for of a small op in a
/// Loop trip made a heap allocation for its std::function).
template <typename Signature>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>>>
  FunctionRef(F&& f)  // NOLINT(google-explicit-constructor): passed a lambda at every call
      : object_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* object, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(object))(std::forward<Args>(args)...);
        }) {}
  R operator()(Args... args) const { return call_(object_, std::forward<Args>(args)...); }

 private:
  void* object_;
  R (*call_)(void*, Args...);
};

class ThreadPool {
 public:
  /// num_threads counts the caller: 1 means no other threads.
  explicit ThreadPool(int num_threads);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  /// Calls fn(begin, end) over [0, n) split into chunks of at least `grain`
  /// items, claimed one at a time by the team's threads (so a thread that
  /// gets no core does not hold up the others). Returns when all chunks are
  /// done; rethrows the first exception. Inside another parallel_for (or any
  /// OpenMP parallel region) it runs on the calling thread alone.
  ///
  /// A sleeping helper is woken only once the caller's first chunk shows that the rest is worth
  /// the wake-up, unless `large` says so beforehand (a caller that knows its work, such as a GEMM of
  /// millions of multiply-adds): then it is woken before the first chunk, so that it starts while
  /// there are chunks left for it.
  void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn, bool large = false) const;

  /// While one lives (a native region's run), helpers spin up to kWarmSpin (1 ms) for the next job
  /// instead of 20 µs, yielding their core now and then and sleeping once a yield hands it to another
  /// thread; a scope on a thread preempted since its last scope is not warm. Any thread may hold one.
  class WarmScope {
   public:
    explicit WarmScope(const ThreadPool& pool);
    ~WarmScope();
    WarmScope(const WarmScope&) = delete;
    WarmScope& operator=(const WarmScope&) = delete;

   private:
    bool warm_;
  };

 private:
  int num_threads_;
};

}  // namespace tessera::native
