// Idle-priority spinners (idle_spinners.h). Contract: spinners exist only at
// SCHED_IDLE and only where the mode says so (TESSERA_IDLE_SPIN, or the probe
// the first scope of more than one thread runs); they spin while some
// IdleSpinScope of more than one thread lives and for kTail after, then sleep
// on a condition variable; a child of fork starts without any (its parent's
// threads are not in it), and probes again.
#include "runtime/idle_spinners.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <vector>

#include "ir/thread_support.h"

namespace tessera {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTail = std::chrono::milliseconds(2);
constexpr int kProbeSamples = 8;  // regions per probe block; two blocks each way

enum class Mode { kProbe, kOn, kOff };

Mode mode_from_environment() {
  const char* value = std::getenv("TESSERA_IDLE_SPIN");
  if (value && std::strcmp(value, "0") == 0) return Mode::kOff;
  if (value && std::strcmp(value, "1") == 0) return Mode::kOn;
  return Mode::kProbe;
}

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

/// Samples of one team's wake-up, added to `wakes` (µs) and `shared` (regions with a CPU shared).
void probe_team(int threads, int samples, std::vector<double>& wakes, int& shared) {
  std::vector<Clock::time_point> arrived(static_cast<size_t>(threads));
  std::vector<int> cpu(static_cast<size_t>(threads));
  for (int i = 0; i < samples; ++i) {
    // Long enough for libgomp's waiting threads to go to sleep (GOMP_SPINCOUNT=1000 is tens of
    // µs), varied so that no timer lines up with it.
    std::this_thread::sleep_for(std::chrono::microseconds(250 + 40 * (i % 4)));
    int team = 1;
    const Clock::time_point start = Clock::now();
#pragma omp parallel num_threads(threads)
    {
      const int t = omp_get_thread_num();
      arrived[static_cast<size_t>(t)] = Clock::now();
      cpu[static_cast<size_t>(t)] = sched_getcpu();
      if (t == 0) team = omp_get_num_threads();
    }
    if (team < 2) continue;
    double last = 0;
    for (int t = 1; t < team; ++t) last = std::max(last, micros(arrived[static_cast<size_t>(t)] - start));
    wakes.push_back(last);
    std::vector<int> used(cpu.begin(), cpu.begin() + team);
    std::sort(used.begin(), used.end());
    shared += std::adjacent_find(used.begin(), used.end()) != used.end() ? 1 : 0;
  }
}

WakeProbe summarise(std::vector<double> wakes, int shared) {
  WakeProbe probe;
  probe.samples = static_cast<int>(wakes.size());
  probe.shared_cpu = shared;
  if (!wakes.empty()) {
    std::nth_element(wakes.begin(), wakes.begin() + wakes.size() / 2, wakes.end());
    probe.median_wake_us = wakes[wakes.size() / 2];
  }
  return probe;
}

class Spinners {
 public:
  static Spinners& get() { return process_singleton<Spinners>(); }

  /// False where no spinner will spin for this scope (the caller then owes no leave()).
  bool enter(int threads) {
    if (!decided_.load(std::memory_order_acquire)) {
      std::lock_guard<std::mutex> lock(mutex_);
      // Not decidable now (inside a parallel region): no spinning this time.
      if (!decided_.load() && !decide_locked(threads)) return false;
    }
    if (!spin_.load(std::memory_order_relaxed)) return false;
    active_.fetch_add(1, std::memory_order_acq_rel);
    if (created_.load(std::memory_order_acquire) >= threads - 1 && sleepers_.load(std::memory_order_acquire) == 0)
      return true;
    std::lock_guard<std::mutex> lock(mutex_);
    start_locked(threads);
    return true;
  }

  void leave() { active_.fetch_sub(1, std::memory_order_acq_rel); }

  std::string decision() {
    std::lock_guard<std::mutex> lock(mutex_);
    return decided_.load() ? decision_ : "not decided yet";
  }

  void set_mode_for_testing(int mode) {
    std::lock_guard<std::mutex> lock(mutex_);
    forced_ = mode < 0 ? Mode::kProbe : mode == 0 ? Mode::kOff : Mode::kOn;
    decided_.store(false);
  }

 private:
  /// Under mutex_: makes the spinners a scope of `threads` wants and wakes sleeping ones.
  void start_locked(int threads) {
    const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    while (!refused_.load() && created_.load() < std::min(threads - 1, cpus - 1)) {
      try {
        std::thread([this] { loop(); }).detach();
      } catch (const std::system_error&) {
        break;  // no more threads for this process: fewer spinners
      }
      created_.fetch_add(1);
    }
    if (sleepers_.load() > 0) {
      { const std::lock_guard<std::mutex> sleep(sleep_mutex_); }  // a sleeper between its check and its wait sees active_
      wake_.notify_all();
    }
  }

  /// Under mutex_: sets spin_ and decided_; false where it cannot decide now.
  bool decide_locked(int threads) {
    const Mode mode = forced_ ? *forced_ : mode_from_environment();
    const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (mode != Mode::kProbe || cpus < 2) {
      spin_.store(mode == Mode::kOn && cpus >= 2);
      decision_ = cpus < 2 ? "off (one CPU)" : mode == Mode::kOn ? "on (TESSERA_IDLE_SPIN=1)" : "off (TESSERA_IDLE_SPIN=0)";
      if (forced_) decision_ = spin_.load() ? "on (forced)" : "off (forced)";
      decided_.store(true);
      return true;
    }
    if (omp_in_parallel()) return false;
    const int team = std::min(threads, cpus);
    std::vector<double> with_wakes, without_wakes;
    int with_shared = 0, without_shared = 0;
    for (int block = 0; block < 2; ++block) {
      if (spin_for_probe(team)) probe_team(team, kProbeSamples, with_wakes, with_shared);
      stop_for_probe();
      probe_team(team, kProbeSamples, without_wakes, without_shared);
    }
    const WakeProbe with = summarise(with_wakes, with_shared);
    const WakeProbe without = summarise(without_wakes, without_shared);
    const bool spin = !refused_.load() && with.samples > 0 && without.samples > 0 && spinners_pay(with, without);
    char line[256];
    std::snprintf(line, sizeof line,
                  "%s (measured at %d threads: team wake-up %.1f us with spinners, %.1f without; a CPU shared in "
                  "%d/%d and %d/%d regions)",
                  spin ? "on" : "off", team, with.median_wake_us, without.median_wake_us, with.shared_cpu, with.samples,
                  without.shared_cpu, without.samples);
    decision_ = refused_.load() ? "off (SCHED_IDLE refused)" : line;
    if (const char* log = std::getenv("TESSERA_IDLE_SPIN_LOG"); log && std::strcmp(log, "0") != 0)
      std::fprintf(stderr, "tessera: idle spinners %s\n", decision_.c_str());
    spin_.store(spin);
    decided_.store(true);
    return true;
  }

  /// Under mutex_: spinners for a team of `team` spinning; false where none could be made.
  bool spin_for_probe(int team) {
    active_.fetch_add(1);
    start_locked(team);
    const auto until = Clock::now() + std::chrono::milliseconds(20);
    while (!refused_.load() && spinning_.load() < created_.load() && Clock::now() < until) std::this_thread::yield();
    return !refused_.load() && created_.load() > 0 && spinning_.load() > 0;
  }

  /// Under mutex_: no spinner spinning (they sleep without the tail), bounded.
  void stop_for_probe() {
    active_.fetch_sub(1);
    no_tail_.store(true);
    const auto until = Clock::now() + std::chrono::milliseconds(20);
    while (spinning_.load() > 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::microseconds(100));
    no_tail_.store(false);
  }

  void loop() {
    sched_param param{};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &param) != 0) {
      // At a normal priority it would take the core from a neighbour: no spinning at all.
      refused_.store(true);
      return;
    }
    for (;;) {
      {
        // Not mutex_: the probe holds that while it waits for this thread to spin.
        std::unique_lock<std::mutex> lock(sleep_mutex_);
        sleepers_.fetch_add(1);
        wake_.wait(lock, [&] { return active_.load() > 0; });
        sleepers_.fetch_sub(1);
      }
      spinning_.fetch_add(1);
      auto until = Clock::now() + kTail;
      for (unsigned i = 1;; ++i) {
        cpu_relax();
        if (i % 256 != 0) continue;
        const auto now = Clock::now();
        if (active_.load(std::memory_order_relaxed) > 0) {
          until = now + kTail;
        } else if (now > until || no_tail_.load(std::memory_order_relaxed)) {
          break;
        }
      }
      spinning_.fetch_sub(1);
    }
  }

  std::mutex mutex_;        // the decision and the making of spinners
  std::mutex sleep_mutex_;  // spinners' sleep
  std::condition_variable wake_;
  std::atomic<int> active_{0};
  std::atomic<int> created_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<int> spinning_{0};
  std::atomic<bool> no_tail_{false};
  std::atomic<bool> decided_{false};
  std::atomic<bool> spin_{false};
  std::atomic<bool> refused_{false};  // the system refused SCHED_IDLE
  std::string decision_;              // guarded by mutex_
  std::optional<Mode> forced_;        // guarded by mutex_
};

}  // namespace

bool spinners_pay(const WakeProbe& with_spinners, const WakeProbe& without) {
  if (with_spinners.samples <= 0 || without.samples <= 0) return false;
  const bool stacked = with_spinners.shared_cpu * 4 > with_spinners.samples &&
                       with_spinners.shared_cpu * without.samples > without.shared_cpu * with_spinners.samples;
  if (stacked) return false;
  return without.median_wake_us >= 2 * with_spinners.median_wake_us &&
         without.median_wake_us - with_spinners.median_wake_us >= 20;
}

std::string idle_spin_decision() { return Spinners::get().decision(); }

void set_idle_spin_mode_for_testing(int mode) { Spinners::get().set_mode_for_testing(mode); }

IdleSpinScope::IdleSpinScope(int threads) {
  if (threads <= 1) return;
  Spinners& spinners = Spinners::get();
  if (spinners.enter(threads)) spinners_ = &spinners;
}

IdleSpinScope::~IdleSpinScope() {
  if (spinners_) static_cast<Spinners*>(spinners_)->leave();
}

}  // namespace tessera
