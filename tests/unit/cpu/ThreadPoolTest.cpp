// The runtime's thread pool: every unit runs exactly once in contiguous ranges, small ranges
// and a busy pool run inline, and concurrent callers both finish.
#include "runtime/ThreadPool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace smelt::rt {
namespace {

/// Runs parallelFor over `units` and expects each unit to have run once.
void expectEachUnitOnce(ThreadPool &pool, int64_t units) {
  std::vector<int> hits(size_t(units), 0);
  std::atomic<int> calls{0};
  pool.parallelFor(units, [&](int64_t begin, int64_t end) {
    ++calls;
    EXPECT_LE(begin, end);
    for (int64_t i = begin; i < end; ++i)
      ++hits[size_t(i)]; // ranges are disjoint: no two threads touch one unit
  });
  EXPECT_LE(calls.load(), int(pool.threads()));
  for (int64_t i = 0; i < units; ++i)
    ASSERT_EQ(hits[size_t(i)], 1) << "unit " << i << " of " << units;
}

TEST(ThreadPool, RunsEveryUnitOnceInContiguousRanges) {
  ThreadPool pool(4);
  EXPECT_EQ(pool.threads(), 4u);
  for (int64_t units : {int64_t(0), int64_t(1), int64_t(3), int64_t(4), int64_t(1000003)})
    expectEachUnitOnce(pool, units);
  for (int round = 0; round < 200; ++round) // jobs back to back reuse the workers
    expectEachUnitOnce(pool, 97);
}

TEST(ThreadPool, ConcurrentCallersBothFinish) {
  ThreadPool pool(3);
  std::thread other([&] {
    for (int round = 0; round < 100; ++round)
      expectEachUnitOnce(pool, 5000);
  });
  for (int round = 0; round < 100; ++round)
    expectEachUnitOnce(pool, 5000);
  other.join();
}

TEST(ThreadPool, OneThreadRunsInline) {
  ThreadPool pool(1);
  std::thread::id caller = std::this_thread::get_id();
  pool.parallelFor(10, [&](int64_t begin, int64_t end) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 10);
  });
}

} // namespace
} // namespace smelt::rt
