// The native backend's parallel_for (backends/native/thread_pool.cc): every index once, from
// concurrent callers; exceptions reach the caller; nested calls run inline; a caller never waits
// for a helper that another job holds; sleeping helpers are woken for long jobs, and before the
// first chunk for a job its caller calls large; inside a WarmScope a helper is still there for a
// short job after a gap that would have put it to sleep.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backends/native/thread_pool.h"

namespace tessera::testing {
namespace {

using native::ThreadPool;

TEST(NativeThreadPool, EveryIndexOnceFromConcurrentCallers) {
  static constexpr int64_t kN = 10007;
  std::vector<std::thread> callers;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([t, &failures] {
      const ThreadPool pool(t % 2 == 0 ? 2 : 3);
      for (int round = 0; round < 50; ++round) {
        std::vector<std::atomic<int>> visits(kN);
        const int64_t grain = 1 + (round * 37 + t) % 900;
        pool.parallel_for(kN, grain, [&](int64_t begin, int64_t end) {
          EXPECT_LE(0, begin);
          EXPECT_LE(end, kN);
          EXPECT_LT(begin, end);
          for (int64_t i = begin; i < end; ++i) visits[static_cast<size_t>(i)].fetch_add(1);
        });
        for (int64_t i = 0; i < kN; ++i) failures[t] += visits[static_cast<size_t>(i)].load() != 1;
      }
    });
  }
  for (std::thread& c : callers) c.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(failures[t], 0) << "caller " << t;
}

TEST(NativeThreadPool, AnExceptionFromAnyChunkReachesTheCaller) {
  const ThreadPool pool(2);
  for (int64_t bad : {int64_t{0}, int64_t{511}, int64_t{1023}}) {
    for (int round = 0; round < 20; ++round) {
      std::atomic<int64_t> done{0};
      try {
        pool.parallel_for(1024, 128, [&](int64_t begin, int64_t end) {  // 8 chunks of 128
          // Slow enough chunks that the helper is woken and takes some.
          std::this_thread::sleep_for(std::chrono::microseconds(200));
          for (int64_t i = begin; i < end; ++i) {
            if (i == bad) throw std::runtime_error("index " + std::to_string(i));
          }
          done += end - begin;
        });
        ADD_FAILURE() << "no exception for index " << bad;
      } catch (const std::runtime_error& e) {
        EXPECT_EQ(std::string(e.what()), "index " + std::to_string(bad));
      }
      // Every other chunk still ran: an exception stops no one else's work.
      EXPECT_EQ(done.load(), 1024 - 128);
    }
  }
  // And the pool still works.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(1000, 10, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

TEST(NativeThreadPool, ANestedCallRunsOnItsCallersThread) {
  const ThreadPool pool(2);
  std::atomic<int> nested_elsewhere{0}, inner_calls{0};
  pool.parallel_for(8, 1, [&](int64_t, int64_t) {
    const std::thread::id outer = std::this_thread::get_id();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    pool.parallel_for(64, 1, [&](int64_t begin, int64_t end) {
      ++inner_calls;
      nested_elsewhere += std::this_thread::get_id() != outer;
      EXPECT_EQ(begin, 0);
      EXPECT_EQ(end, 64);  // one call for the whole range
    });
  });
  EXPECT_EQ(inner_calls.load(), 8);
  EXPECT_EQ(nested_elsewhere.load(), 0);
}

// One job holds the only helper (its chunk waits until the second job is done); the second job,
// from another thread, must finish on its caller alone instead of waiting for that helper.
TEST(NativeThreadPool, ACallerNeverWaitsForAHelperAnotherJobHolds) {
  const ThreadPool pool(2);
  std::atomic<bool> second_done{false};
  std::atomic<int> held{0}, timed_out{0};
  auto hold = [&](int64_t, int64_t) {
    ++held;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!second_done.load()) {
      if (std::chrono::steady_clock::now() > give_up) {
        ++timed_out;
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  };
  std::thread first([&] { pool.parallel_for(2, 1, hold); });
  // Wait until the first job's caller is inside its chunk; then a long second job wakes the helper,
  // which takes the first job's other chunk (the oldest open job) and holds there too.
  while (held.load() < 1) std::this_thread::sleep_for(std::chrono::microseconds(100));
  std::atomic<int64_t> sum{0};
  pool.parallel_for(64, 1, [&](int64_t begin, int64_t end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    for (int64_t i = begin; i < end; ++i) sum += i;
  });
  second_done = true;
  first.join();
  EXPECT_EQ(sum.load(), 63 * 64 / 2);
  EXPECT_EQ(held.load(), 2);  // the helper did take the first job's other chunk
  EXPECT_EQ(timed_out.load(), 0) << "the second job waited for the helper the first job held";
}

// A long job wakes a sleeping helper: its chunks run on two threads.
TEST(NativeThreadPool, ALongJobWakesASleepingHelper) {
  const ThreadPool pool(2);
  for (int attempt = 0; attempt < 3; ++attempt) {
    // Long enough apart that the helper has gone to sleep (it spins about 20 µs).
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::mutex mutex;
    std::set<std::thread::id> threads;
    pool.parallel_for(8, 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::lock_guard<std::mutex> lock(mutex);
      threads.insert(std::this_thread::get_id());
    });
    EXPECT_EQ(threads.size(), 2u) << "attempt " << attempt;
  }
}

// A job its caller calls large wakes a sleeping helper before the caller's first chunk: chunk 0
// waits for chunk 1 to start on another thread, which it can only where the helper was woken before
// the caller's first chunk ended (whichever of the two the caller took). Without `large` the pool
// has the caller run a chunk first, and the wait runs out.
TEST(NativeThreadPool, ALargeJobWakesASleepingHelperBeforeItsFirstChunk) {
  const ThreadPool pool(2);
  // The helper exists (a new one joins whatever job is open when it starts).
  pool.parallel_for(64, 1, [](int64_t, int64_t) { std::this_thread::sleep_for(std::chrono::microseconds(100)); });
  for (const bool large : {true, false}) {
    SCOPED_TRACE(large ? "large" : "not large");
    // Long enough apart that the helper has gone to sleep (it spins about 20 µs).
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::atomic<bool> second_started{false};
    std::atomic<bool> waited_out{false};
    std::thread::id ran_on[2];
    pool.parallel_for(2, 1, [&](int64_t begin, int64_t) {
      ran_on[begin] = std::this_thread::get_id();
      if (begin == 1) {
        second_started = true;
        return;
      }
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
      while (!second_started && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      waited_out = !second_started;
    }, large);
    EXPECT_EQ(waited_out.load(), !large);
    if (large) EXPECT_NE(ran_on[0], ran_on[1]) << "both chunks ran on one thread";
  }
}

/// Runs a two-chunk job that is not large, whose chunk 0 waits (up to 50 ms) for chunk 1 to start on
/// another thread: true when it did, which only a helper already awake can do (a sleeping one is woken
/// only after the caller's first chunk).
bool second_chunk_came_while_the_first_waited(const ThreadPool& pool) {
  std::atomic<bool> second_started{false};
  std::atomic<bool> came{false};
  pool.parallel_for(2, 1, [&](int64_t begin, int64_t) {
    if (begin == 1) {
      second_started = true;
      return;
    }
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (!second_started && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    came = second_started.load();
  });
  return came;
}

// Inside a WarmScope (a native region's run) a helper spins past a 300 µs gap between jobs, where it
// would sleep after about 20 µs outside one. A warm helper sleeps when another thread takes its core
// (so does a scope on a thread preempted since its last one), as it should on a loaded machine: the
// suite's name puts this test in a CTest group of its own that runs alone (RUN_SERIAL, tests/CMakeLists.txt;
// with a CPU-bound test beside it, ten tries in a row found the helper asleep), and up to 50 tries spaced
// by 2 ms must find it awake once.
TEST(NativeThreadPoolRunAlone, InsideAWarmScopeAHelperWaitsThroughAGapBetweenJobs) {
  const ThreadPool pool(2);
  pool.parallel_for(64, 1, [](int64_t, int64_t) { std::this_thread::sleep_for(std::chrono::microseconds(100)); });
  int awake = 0;
  for (int attempt = 0; attempt < 50 && awake == 0; ++attempt) {
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const ThreadPool::WarmScope warm(pool);
    // The helper's last job before the gap (large: it is woken for it, wherever it was).
    pool.parallel_for(8, 1, [](int64_t, int64_t) { std::this_thread::sleep_for(std::chrono::microseconds(50)); }, true);
    // The gap: this thread busy (a run's inline steps), not asleep.
    const auto gap_end = std::chrono::steady_clock::now() + std::chrono::microseconds(300);
    while (std::chrono::steady_clock::now() < gap_end) {
    }
    awake += second_chunk_came_while_the_first_waited(pool);
  }
  EXPECT_GE(awake, 1) << "the helper slept through every gap";
  // Outside any scope it sleeps after about 20 µs: a 50 ms gap leaves it asleep however loaded the machine.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(second_chunk_came_while_the_first_waited(pool));
}

}  // namespace
}  // namespace tessera::testing
