// How many of this process's CPUs other processes keep busy, for a thread count that follows
// the load. OpenMP's threads (Smelt's loops and oneDNN's share them) end each parallel region at
// a barrier and spin there: beside another busy process, the thread that shares its CPU falls
// behind and the others spin waiting for it, and under a heavier load a spinning thread burns
// the time slice the one it waits for needs (the CNN's backward convolutions took up to 4.6 s
// instead of 20 ms at a load of 7 on 2 CPUs; bench/RESULTS.md). Fewer threads than CPUs left
// free avoids both. OpenMP's own remedy, OMP_WAIT_POLICY=passive, can only be set in the
// environment before the process starts.
#pragma once

#include <chrono>
#include <mutex>
#include <string_view>
#include <vector>

namespace smelt::rt {

/// The busy clock ticks (user, system, irq, softirq, steal) of the CPUs `cpus` in /proc/stat's
/// text: "cpuN ..." lines; other lines, and CPUs not listed, are skipped. Niced processes'
/// time is left out: they yield their CPU to ours (a nice-19 build gets under 2% of a CPU it
/// shares), so they hold no barrier back.
unsigned long long busyTicksOf(std::string_view procStat, const std::vector<int> &cpus);

/// The threads to run on: `threads` less the CPUs others keep busy (`othersCores`, rounded:
/// half a CPU's worth counts as one, the CPU that thread would share), at least 1.
int threadsForLoad(int threads, double othersCores);

/// Watches the CPUs of this process's affinity mask: over windows of at least `window`, the
/// CPU time all processes spent on them (/proc/stat) less this process's own
/// (CLOCK_PROCESS_CPUTIME_ID), per second of wall time. One per process (instance()).
class CpuLoad {
public:
  explicit CpuLoad(std::chrono::milliseconds window);
  static CpuLoad &instance();

  /// The CPUs others kept busy over the last whole window, or, until one has passed, over the
  /// first window so far once it is 2/5 of a window long (0 before, or where /proc/stat
  /// cannot be read); starts a new window when the current one is long enough. The early
  /// estimate is what a short job runs by: 50 steps of 4 ms end before a whole window has.
  double othersCores();

  /// Starts the first window now, if none has started, so that the first run already finds
  /// an estimate: the executors call it when they are made, before the caller's first run.
  void watch();

private:
  struct Sample {
    std::chrono::steady_clock::time_point wall;
    double ownSeconds = 0;
    unsigned long long busyTicks = 0;
  };
  bool sample(Sample &into) const;
  /// Others' CPUs from `start_` to `now`.
  double othersSince(const Sample &now) const;

  std::mutex mutex_;
  std::chrono::milliseconds window_;
  std::vector<int> cpus_;
  Sample start_;
  bool started_ = false;
  bool estimated_ = false; // othersCores_ is measured (over part of a window or a whole one)
  double othersCores_ = 0;
};

} // namespace smelt::rt
