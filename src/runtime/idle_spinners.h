// Idle-priority spinners: while a run on more than one thread lasts, the
// session's other cores are kept from going idle.
//
// Why: on a VM whose idle vCPU halts to its host (this project's PVM guests),
// waking a sleeping thread there took 0.1-1.8 ms, and each of oneDNN's
// parallel steps waits for its OpenMP team to arrive: GoogLeNet at 2 threads
// read 34-40 ms, against 21 on one thread. A thread that spins at SCHED_IDLE
// keeps such a vCPU running without taking it from anything else (the kernel
// runs it only where no other thread wants the core, and preempts it at once
// for one that does), so the team's wake-ups land on a running vCPU: GoogLeNet
// 17-18 ms. Unlike a longer libgomp spin (GOMP_SPINCOUNT), it does not fight a
// busy neighbour process for the core. TESSERA_IDLE_SPIN=0 turns it off.
#pragma once

namespace tessera {

/// While one lives with threads > 1, up to threads - 1 spinners (SCHED_IDLE; none where the
/// system refuses that policy) spin, and for 2 ms after the last one ends (back-to-back runs
/// pay no wake-up of their own); then they sleep. Cheap to create (an atomic increment) while
/// they spin.
class IdleSpinScope {
 public:
  explicit IdleSpinScope(int threads);
  ~IdleSpinScope();
  IdleSpinScope(const IdleSpinScope&) = delete;
  IdleSpinScope& operator=(const IdleSpinScope&) = delete;

 private:
  void* spinners_ = nullptr;  // the process's spinners when engaged (a fork's child has others)
};

}  // namespace tessera
