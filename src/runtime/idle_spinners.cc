// Idle-priority spinners (idle_spinners.h). Contract: spinners exist only at
// SCHED_IDLE; they spin while some IdleSpinScope of more than one thread lives
// and for kTail after, then sleep on a condition variable; a child of fork
// starts without any (its parent's threads are not in it) and makes its own.
#include "runtime/idle_spinners.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>

#include "ir/thread_support.h"

namespace tessera {
namespace {

constexpr auto kTail = std::chrono::milliseconds(2);

bool idle_spin_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("TESSERA_IDLE_SPIN");
    return !(value && std::strcmp(value, "0") == 0);
  }();
  return enabled;
}

class Spinners {
 public:
  static Spinners& get() { return process_singleton<Spinners>(); }

  void enter(int threads) {
    const int wanted = threads - 1;
    active_.fetch_add(1, std::memory_order_acq_rel);
    if (created_.load(std::memory_order_acquire) >= wanted && sleepers_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::mutex> lock(mutex_);
    const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    while (!refused_ && created_.load() < std::min(wanted, cpus - 1)) {
      try {
        std::thread([this] { loop(); }).detach();
      } catch (const std::system_error&) {
        break;  // no more threads for this process: fewer spinners
      }
      created_.fetch_add(1);
    }
    if (sleepers_.load() > 0) wake_.notify_all();
  }

  void leave() { active_.fetch_sub(1, std::memory_order_acq_rel); }

 private:
  void loop() {
    sched_param param{};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) != 0) {
      // At a normal priority it would take the core from a neighbour: no spinning at all.
      std::lock_guard<std::mutex> lock(mutex_);
      refused_ = true;
      return;
    }
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lock, [&] { return active_.load() > 0; });
        sleepers_.fetch_sub(1);
      }
      auto until = std::chrono::steady_clock::now() + kTail;
      for (unsigned i = 1;; ++i) {
        cpu_relax();
        if (i % 256 != 0) continue;
        const auto now = std::chrono::steady_clock::now();
        if (active_.load(std::memory_order_relaxed) > 0) {
          until = now + kTail;
        } else if (now > until) {
          break;
        }
      }
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::atomic<int> active_{0};
  std::atomic<int> created_{0};
  std::atomic<int> sleepers_{0};
  bool refused_ = false;  // guarded by mutex_
};

}  // namespace

IdleSpinScope::IdleSpinScope(int threads) {
  if (threads <= 1 || !idle_spin_enabled()) return;
  Spinners& spinners = Spinners::get();
  spinners.enter(threads);
  spinners_ = &spinners;
}

IdleSpinScope::~IdleSpinScope() {
  if (spinners_) static_cast<Spinners*>(spinners_)->leave();
}

}  // namespace tessera
