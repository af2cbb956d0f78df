// Parallel loops on OpenMP's team. One loop at a time in the process: a second caller runs its
// range inline, as a busy pool did before, rather than starting a second team.
#include "runtime/Parallel.h"

#include "runtime/CpuThreads.h"

#include <omp.h>

#include <algorithm>
#include <mutex>

namespace smelt::rt {

void parallelFor(int threads, int64_t units, const std::function<void(int64_t, int64_t)> &fn) {
  static std::mutex running;
  int ranges = int(std::min<int64_t>(threads, units));
  std::unique_lock<std::mutex> lock(running, std::try_to_lock);
  if (ranges <= 1 || !lock.owns_lock() || omp_in_parallel()) {
    if (units > 0)
      fn(0, units);
    return;
  }
#pragma omp parallel num_threads(ranges)
  {
    // OpenMP may give fewer threads than asked (OMP_THREAD_LIMIT, OMP_DYNAMIC): the team
    // shares the ranges out.
    for (int r = omp_get_thread_num(); r < ranges; r += omp_get_num_threads())
      fn(units * r / ranges, units * (r + 1) / ranges);
  }
}

void parallelFor(int64_t units, const std::function<void(int64_t, int64_t)> &fn) {
  parallelFor(threadsOfThisThread(), units, fn);
}

} // namespace smelt::rt
