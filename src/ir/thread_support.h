// Pieces shared by the process-wide thread sets (native's parallel_for helpers,
// backends/native/thread_pool.cc; the idle-priority spinners, runtime/idle_spinners.cc):
// one instance per process that a child of fork does not inherit, and the pause of
// a spin-wait loop.
#pragma once
#include <pthread.h>

#include <atomic>
#include <mutex>
#include <new>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tessera {

/// One pause of a spin-wait loop (x86 `pause`: it yields the core's pipeline to an SMT sibling).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

/// The process's T, made on first use and never freed (threads it starts may wait on it until the
/// process ends). In a child of fork the first use makes a new one: the parent's threads are not in
/// the child, and a mutex one of them held stays held there. The parent's is kept reachable (not a leak).
template <typename T>
T& process_singleton() {
  static std::atomic<T*> instance{nullptr};
  static std::atomic<T*> abandoned{nullptr};
  static std::mutex create;
  static std::once_flag once;
  std::call_once(once, [] {
    pthread_atfork(nullptr, nullptr, [] {
      abandoned.store(instance.exchange(nullptr));
      new (&create) std::mutex();
    });
  });
  T* t = instance.load(std::memory_order_acquire);
  if (t) return *t;
  std::lock_guard<std::mutex> lock(create);
  t = instance.load(std::memory_order_relaxed);
  if (!t) {
    t = new T();
    instance.store(t, std::memory_order_release);
  }
  return *t;
}

}  // namespace tessera
