// The load of other processes on this process's CPUs, from /proc/stat and the process's CPU
// clock.
#include "runtime/CpuLoad.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace smelt::rt {

unsigned long long busyTicksOf(std::string_view procStat, const std::vector<int> &cpus) {
  unsigned long long busy = 0;
  while (!procStat.empty()) {
    size_t newline = procStat.find('\n');
    std::string_view line = procStat.substr(0, newline);
    procStat = newline == std::string_view::npos ? "" : procStat.substr(newline + 1);
    // "cpuN user nice system idle iowait irq softirq steal ..."; the "cpu " total is skipped.
    if (line.size() < 4 || line.substr(0, 3) != "cpu" || line[3] < '0' || line[3] > '9')
      continue;
    int cpu = -1;
    auto [end, error] = std::from_chars(line.data() + 3, line.data() + line.size(), cpu);
    if (error != std::errc() || std::find(cpus.begin(), cpus.end(), cpu) == cpus.end())
      continue;
    std::istringstream fields{std::string(end, line.data() + line.size())};
    unsigned long long value[8] = {};
    for (unsigned long long &v : value)
      if (!(fields >> v))
        v = 0;
    busy += value[0] + value[2] + value[5] + value[6] + value[7];
  }
  return busy;
}

int threadsForLoad(int threads, double othersCores) {
  if (!(othersCores > 0)) // also NaN
    return std::max(threads, 1);
  return std::clamp(threads - int(std::floor(othersCores + 0.5)), 1, std::max(threads, 1));
}

CpuLoad::CpuLoad(std::chrono::milliseconds window) : window_(window) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set))
        cpus_.push_back(cpu);
}

CpuLoad &CpuLoad::instance() {
  // /proc/stat counts in ticks of 10 ms: a quarter of a second keeps the error of a window
  // within a few percent of a CPU, and the file is read at most four times a second.
  static CpuLoad load(std::chrono::milliseconds(250));
  return load;
}

bool CpuLoad::sample(Sample &into) const {
  std::ifstream file("/proc/stat");
  std::stringstream text;
  text << file.rdbuf();
  timespec own{};
  if (!file || clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &own) != 0)
    return false;
  into.wall = std::chrono::steady_clock::now();
  into.ownSeconds = double(own.tv_sec) + double(own.tv_nsec) * 1e-9;
  into.busyTicks = busyTicksOf(text.str(), cpus_);
  return true;
}

double CpuLoad::othersSince(const Sample &now) const {
  double wall = std::chrono::duration<double>(now.wall - start_.wall).count();
  double busy = double(now.busyTicks - start_.busyTicks) / double(sysconf(_SC_CLK_TCK));
  double own = now.ownSeconds - start_.ownSeconds;
  return wall > 0 ? std::max(0.0, busy - own) / wall : 0;
}

double CpuLoad::othersCores() {
  std::lock_guard<std::mutex> lock(mutex_);
  auto elapsed = std::chrono::steady_clock::now() - start_.wall;
  // Once in the first window, 2/5 of the way in, then once per whole window: /proc/stat
  // grows with the CPUs (a few ms to read on hundreds), so not on every run.
  bool early = started_ && !estimated_ && elapsed >= window_ * 2 / 5;
  if (started_ && elapsed < window_ && !early)
    return othersCores_;
  Sample current;
  if (cpus_.empty() || !sample(current))
    return othersCores_ = 0;
  if (started_) {
    othersCores_ = othersSince(current);
    estimated_ = true;
  }
  if (!early || current.wall - start_.wall >= window_) {
    start_ = current;
    started_ = true;
  }
  return othersCores_;
}

void CpuLoad::watch() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!started_ && !cpus_.empty() && sample(start_))
    started_ = true;
}

} // namespace smelt::rt
