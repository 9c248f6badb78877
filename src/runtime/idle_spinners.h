// Idle-priority spinners: while a run on more than one thread lasts, the
// session's other cores may be kept from going idle, where that was measured to pay.
//
// Why: on a VM whose idle vCPU halts to its host (this project's PVM guests),
// waking a sleeping thread there took 0.1-1.8 ms, and each of oneDNN's
// parallel steps waits for its OpenMP team to arrive: GoogLeNet at 2 threads
// read 34-40 ms, against 21 on one thread. A thread that spins at SCHED_IDLE
// keeps such a vCPU running without taking it from anything else (the kernel
// runs it only where no other thread wants the core, and preempts it at once
// for one that does), so the team's wake-ups land on a running vCPU: GoogLeNet
// 17-18 ms. Unlike a longer libgomp spin (GOMP_SPINCOUNT), it does not fight a
// busy neighbour process for the core.
//
// Why measured: on another guest (Zen 4, Linux 6.18, which packs wake-ups onto
// busy vCPUs) the kernel put the woken team thread on the CPU of the thread
// that woke it whenever a spinner held the other one, and every parallel step
// then ran its two halves one after the other: ResNet-18 at 2 threads read
// 20-25 ms with spinners (p90 33) against 16-17 without, VGG-11 97-101 against
// 81-83. So the first scope of more than one thread in a process probes both
// (wake-up latency of a sleeping OpenMP team, and whether a woken thread lands
// on a CPU another team thread holds) and keeps spinners only where they make
// the wake-up clearly faster without stacking the team. TESSERA_IDLE_SPIN=0
// turns them off, =1 on without probing; TESSERA_IDLE_SPIN_LOG=1 prints the
// probe and the decision to stderr.
#pragma once

#include <string>

namespace tessera {

/// While one lives with threads > 1, up to threads - 1 spinners (SCHED_IDLE; none where the
/// system refuses that policy or the probe said they do not pay) spin, and for 2 ms after the
/// last one ends (back-to-back runs pay no wake-up of their own); then they sleep. Cheap to
/// create (an atomic increment) while they spin; the process's first one with threads > 1
/// probes (about 20 ms) unless TESSERA_IDLE_SPIN says what to do.
class IdleSpinScope {
 public:
  explicit IdleSpinScope(int threads);
  ~IdleSpinScope();
  IdleSpinScope(const IdleSpinScope&) = delete;
  IdleSpinScope& operator=(const IdleSpinScope&) = delete;

 private:
  void* spinners_ = nullptr;  // the process's spinners when engaged (a fork's child has others)
};

/// One probe of an OpenMP team's wake-up: `samples` parallel regions entered after the team had
/// time to fall asleep.
struct WakeProbe {
  int samples = 0;
  double median_wake_us = 0;  // from entering the region to its last thread's arrival
  int shared_cpu = 0;         // regions in which two of the team's threads ran on one CPU
};

/// Whether spinners pay, from a probe with them spinning and one without: not where they stack
/// the team (a woken thread sharing a CPU in over a quarter of the regions, more often than
/// without them), and only where the wake-up without them is at least twice as slow and 20 µs
/// slower than with them.
bool spinners_pay(const WakeProbe& with_spinners, const WakeProbe& without);

/// The process's decision so far, for reports and logs: "on (TESSERA_IDLE_SPIN=1)",
/// "off (measured: ...)", "not decided yet", ...
std::string idle_spin_decision();

/// Tests: 1 spin whenever a scope asks, 0 never, -1 probe again at the next scope.
void set_idle_spin_mode_for_testing(int mode);

}  // namespace tessera
