// Idle-priority spinners (runtime/idle_spinners.h), observed from outside through /proc: while a
// scope of two threads lives a SCHED_IDLE thread of this process runs (state R); after it, every
// such thread sleeps; a one-thread scope wakes none.
#include <dirent.h>
#include <sched.h>

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/idle_spinners.h"

namespace tessera::testing {
namespace {

struct IdleThreads {
  int running = 0;   // state R: on a CPU or waiting for one
  int sleeping = 0;  // any other state
};

/// This process's SCHED_IDLE threads, by state (from /proc/self/task/TID/stat's third field).
IdleThreads idle_threads() {
  IdleThreads found;
  DIR* tasks = opendir("/proc/self/task");
  if (!tasks) return found;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    const pid_t tid = static_cast<pid_t>(std::stol(entry->d_name));
    if (sched_getscheduler(tid) != SCHED_IDLE) continue;
    std::ifstream stat(std::string("/proc/self/task/") + entry->d_name + "/stat");
    std::string line;
    std::getline(stat, line);
    const size_t close = line.rfind(')');  // the name may hold spaces and parentheses
    if (close == std::string::npos || close + 2 >= line.size()) continue;
    (line[close + 2] == 'R' ? found.running : found.sleeping) += 1;
  }
  closedir(tasks);
  return found;
}

/// Polls `condition` for up to two seconds.
template <typename F>
bool within_two_seconds(F condition) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < until) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

TEST(IdleSpinners, SpinAtIdlePriorityWhileATwoThreadScopeLivesAndSleepAfter) {
  if (std::thread::hardware_concurrency() < 2) {
    // One CPU: there is no other core to keep awake, and no spinner is made. Asserted as such.
    const IdleSpinScope scope(2);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(idle_threads().running + idle_threads().sleeping, 0);
    return;
  }
  for (int round = 0; round < 2; ++round) {
    {
      const IdleSpinScope scope(2);
      EXPECT_TRUE(within_two_seconds([] { return idle_threads().running >= 1; }))
          << "round " << round << ": no SCHED_IDLE thread ran while the scope lived";
    }
    // After the 2 ms tail every spinner sleeps until the next scope.
    EXPECT_TRUE(within_two_seconds([] {
      const IdleThreads t = idle_threads();
      return t.running == 0 && t.sleeping >= 1;
    })) << "round " << round << ": a spinner still ran after its scope ended";
  }
}

TEST(IdleSpinners, AOneThreadScopeWakesNone) {
  // Whatever an earlier test left, every spinner is asleep first.
  ASSERT_TRUE(within_two_seconds([] { return idle_threads().running == 0; }));
  const IdleSpinScope scope(1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(idle_threads().running, 0);
}

}  // namespace
}  // namespace tessera::testing
