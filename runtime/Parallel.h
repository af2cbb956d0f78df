// Parallel loops for the CPU executor's kernels, on the OpenMP runtime that oneDNN runs on
// (Debian's libdnnl is built with DNNL_CPU_RUNTIME=OMP, libgomp): Smelt's kernels and oneDNN's
// primitives share one team of threads, so the threads one leaves waiting are the ones the
// other wakes, instead of two pools spinning against each other for the same cores. The team
// has as many threads as the run was given (runtime/CpuThreads.h).
#pragma once

#include <cstdint>
#include <functional>

namespace smelt::rt {

/// Calls fn(begin, end) on contiguous ranges covering [0, units), at most `threads` of them,
/// on that many threads of the OpenMP team (the caller is one), and returns when all have
/// run. While another parallelFor runs, or inside an OpenMP parallel region, the whole range
/// runs inline on this thread instead: concurrent callers (replicas on threads) never stack
/// teams on the same cores. fn must not throw.
void parallelFor(int threads, int64_t units, const std::function<void(int64_t, int64_t)> &fn);

/// parallelFor on the calling thread's count (threadsOfThisThread): the one the CPU executor
/// chose for this run, cpuThreads() or fewer.
void parallelFor(int64_t units, const std::function<void(int64_t, int64_t)> &fn);

} // namespace smelt::rt
