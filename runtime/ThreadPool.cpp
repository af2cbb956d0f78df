// The executor's thread pool. A job lives on the caller's stack: workers count themselves in
// under the mutex before touching it, and the caller returns only when every range has run and
// no worker still holds the job.
#include "runtime/ThreadPool.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace smelt::rt {

struct ThreadPool::Job {
  const std::function<void(int64_t, int64_t)> *fn;
  int64_t units;
  int ranges;
  std::atomic<int> next{0};
  int done = 0;    // ranges run, under mutex_
  int holders = 0; // workers inside runRanges, under mutex_
};

ThreadPool &ThreadPool::shared() {
  static ThreadPool pool([] {
    if (const char *text = std::getenv("SMELT_CPU_THREADS"))
      if (int n = std::atoi(text); n > 0)
        return unsigned(n);
    return std::max(1u, std::thread::hardware_concurrency());
  }());
  return pool;
}

ThreadPool::ThreadPool(unsigned threads) {
  for (unsigned i = 1; i < threads; ++i)
    workers_.emplace_back([this] { work(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread &worker : workers_)
    worker.join();
}

int ThreadPool::runRanges(Job &job) {
  int ran = 0;
  for (int r; (r = job.next.fetch_add(1)) < job.ranges; ++ran)
    (*job.fn)(job.units * r / job.ranges, job.units * (r + 1) / job.ranges);
  return ran;
}

void ThreadPool::work() {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || (job_ && generation_ != seen); });
    if (stop_)
      return;
    seen = generation_;
    Job &job = *job_;
    ++job.holders;
    lock.unlock();
    int ran = runRanges(job);
    lock.lock();
    job.done += ran;
    --job.holders;
    if (job.done == job.ranges && job.holders == 0)
      finished_.notify_all();
  }
}

void ThreadPool::parallelFor(int64_t units, const std::function<void(int64_t, int64_t)> &fn) {
  int ranges = int(std::min<int64_t>(threads(), units));
  if (ranges <= 1 || !submit_.try_lock()) {
    if (units > 0)
      fn(0, units);
    return;
  }
  std::lock_guard<std::mutex> release(submit_, std::adopt_lock);
  Job job{&fn, units, ranges};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &job;
    ++generation_;
  }
  wake_.notify_all();
  int ran = runRanges(job);
  std::unique_lock<std::mutex> lock(mutex_);
  job.done += ran;
  finished_.wait(lock, [&] { return job.done == job.ranges && job.holders == 0; });
  job_ = nullptr;
}

} // namespace smelt::rt
