// How many threads the CPU executor runs on, from one source for Smelt's kernels and oneDNN's:
// the tools' --cpu-threads, else SMELT_CPU_THREADS, else the CPUs this process may use (its
// affinity mask, capped by a cgroup v2 CPU quota), less those other processes keep busy
// (CpuLoad.h), decided again before each run. Both run on the same OpenMP team
// (runtime/Parallel.h), so the count is also OpenMP's.
#pragma once

#include "runtime/Status.h"

#include <string>
#include <string_view>

namespace smelt::rt {

/// The most threads a count may ask for: more is a typo, not a machine.
constexpr int kMaxCpuThreads = 1024;

/// Parses a thread count as `source` (SMELT_CPU_THREADS, --cpu-threads) gives it: a whole
/// number from 1 to kMaxCpuThreads, nothing else around it; errors name the source and value.
Expected<int> parseCpuThreads(std::string_view text, std::string_view source);

/// The CPUs a cgroup v2 `cpu.max` file's text allows, rounded up ("150000 100000" is 2);
/// 0 for "max ..." (no quota) or text that is not a quota.
int cpuQuotaFromCpuMax(std::string_view text);

/// The CPUs the cgroup v2 quotas allow this process: the smallest quota on the path from its
/// cgroup (the "0::" line of `procSelfCgroup`, the text of /proc/self/cgroup) up to the
/// hierarchy's root `cgroupRoot` (/sys/fs/cgroup). 0 when no quota applies or there is no
/// cgroup v2 hierarchy.
int cgroupCpuLimit(const std::string &cgroupRoot, std::string_view procSelfCgroup);

/// The default count: the CPUs in this process's affinity mask, at most the cgroup quota.
int defaultCpuThreads();

/// Fixes the process's count (the tools' --cpu-threads); it wins over SMELT_CPU_THREADS, and
/// applies to the OpenMP threads of the calling thread at once and to other threads as they
/// first use oneDNN. Call it before the first run.
void setCpuThreads(int threads);

/// The process's count: setCpuThreads's, else SMELT_CPU_THREADS's, else defaultCpuThreads().
/// An error when SMELT_CPU_THREADS is set but is not a count (CpuExecutor::create reports it).
Expected<int> cpuThreads();
/// cpuThreads(), or defaultCpuThreads() where SMELT_CPU_THREADS is not a count (for work that
/// does not report that error itself: OpenMP, the compiler's threads).
int cpuThreadsOrDefault();

/// The calling thread's OpenMP count: what the last applyRunThreadsToOpenMp on it chose, else
/// (first told now) cpuThreads().
int threadsOfThisThread();

/// Whether the count follows other processes' load: the default count does; one the user
/// gave (--cpu-threads, SMELT_CPU_THREADS) is kept as given.
bool cpuThreadsFollowLoad();

/// The threads of the run the calling thread is about to start, told to OpenMP on this thread:
/// cpuThreads(), less the CPUs other processes kept busy lately (threadsForLoad) where the
/// count follows the load. The CPU executor calls it before each run; its kernels and oneDNN's
/// primitives (made for each count they meet, OneDnn.h) then run on that many.
int applyRunThreadsToOpenMp();

} // namespace smelt::rt
