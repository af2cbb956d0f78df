// A small pool of worker threads for the CPU executor: it splits a range of independent units
// (a fused kernel's elements or reduced results) into one contiguous range per thread. The
// process has one pool, made on first use, so executors share the cores instead of
// oversubscribing them.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace smelt::rt {

class ThreadPool {
public:
  /// The process's pool: std::thread::hardware_concurrency() threads in all, or
  /// SMELT_CPU_THREADS when set (1 runs everything on the caller's thread).
  static ThreadPool &shared();

  /// A pool of `threads` in all: the caller plus threads - 1 workers.
  explicit ThreadPool(unsigned threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  unsigned threads() const { return unsigned(workers_.size()) + 1; }

  /// Calls fn(begin, end) on contiguous ranges covering [0, units), at most one per thread, and
  /// returns when all have run; the caller runs ranges too. If another caller is using the
  /// pool, the whole range runs inline on this thread instead of waiting.
  void parallelFor(int64_t units, const std::function<void(int64_t, int64_t)> &fn);

private:
  struct Job;
  void work();
  /// Runs the job's ranges still unclaimed; returns how many it ran.
  static int runRanges(Job &job);

  std::vector<std::thread> workers_;
  std::mutex submit_; // one parallelFor at a time
  std::mutex mutex_;  // guards everything below
  std::condition_variable wake_, finished_;
  Job *job_ = nullptr;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

} // namespace smelt::rt
