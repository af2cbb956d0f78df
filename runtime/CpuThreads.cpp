// The CPU thread count: parsing, the affinity mask and cgroup v2 quota behind the default, and
// the process's choice, resolved once and handed to OpenMP per thread.
#include "runtime/CpuThreads.h"

#include "runtime/CpuLoad.h"

#include <fmt/format.h>
#include <omp.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <optional>
#include <sstream>

namespace smelt::rt {

Expected<int> parseCpuThreads(std::string_view text, std::string_view source) {
  int threads = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), threads);
  if (text.empty() || error == std::errc::invalid_argument || end != text.data() + text.size())
    return Status::error(fmt::format("{}='{}' is not a thread count (a whole number from 1 to {})",
                                     source, text, kMaxCpuThreads));
  if (error == std::errc::result_out_of_range || threads < 1 || threads > kMaxCpuThreads)
    return Status::error(fmt::format("{}={} is out of range: a thread count is from 1 to {}",
                                     source, text, kMaxCpuThreads));
  return threads;
}

int cpuQuotaFromCpuMax(std::string_view text) {
  std::istringstream in{std::string(text)};
  long long quota = 0, period = 0;
  if (!(in >> quota >> period) || quota <= 0 || period <= 0)
    return 0; // "max 100000", or not a quota
  return int(std::min<long long>((quota + period - 1) / period, kMaxCpuThreads));
}

int cgroupCpuLimit(const std::string &cgroupRoot, std::string_view procSelfCgroup) {
  std::istringstream lines{std::string(procSelfCgroup)};
  std::string path;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("0::", 0) == 0)
      path = line.substr(3);
  if (path.empty() || path[0] != '/')
    return 0;
  int limit = 0;
  // From the process's cgroup up to the root: a quota anywhere on the way applies. Inside a
  // container without its own cgroup namespace the path may not exist under the root; the
  // walk then finds the root's file only.
  for (;;) {
    std::ifstream file(cgroupRoot + path + (path == "/" ? "" : "/") + "cpu.max");
    std::stringstream text;
    text << file.rdbuf();
    if (int quota = cpuQuotaFromCpuMax(text.str()); quota > 0)
      limit = limit ? std::min(limit, quota) : quota;
    if (path == "/")
      return limit;
    size_t slash = path.find_last_of('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
}

int defaultCpuThreads() {
  int threads = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    threads = CPU_COUNT(&set);
  if (threads <= 0) // more CPUs than a cpu_set_t holds, or no answer
    threads = int(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  std::ifstream file("/proc/self/cgroup");
  std::stringstream cgroup;
  cgroup << file.rdbuf();
  if (int quota = cgroupCpuLimit("/sys/fs/cgroup", cgroup.str()); quota > 0)
    threads = std::min(threads, quota);
  return std::clamp(threads, 1, kMaxCpuThreads);
}

namespace {
std::mutex chosenMutex;
std::optional<Expected<int>> chosen; // resolved on first use, or set
bool chosenByUser = false;            // set, or from SMELT_CPU_THREADS
thread_local bool toldOpenMp = false; // this thread's OpenMP count was set by one of us

/// Tells OpenMP on the calling thread to use cpuThreads() threads (or the default when the
/// environment's count is bad): oneDNN sizes its parallel regions by the calling thread's
/// omp_get_max_threads(), which each thread holds separately.
void applyCpuThreadsToOpenMp() {
  omp_set_num_threads(cpuThreadsOrDefault());
  toldOpenMp = true;
}
} // namespace

void setCpuThreads(int threads) {
  {
    std::lock_guard<std::mutex> lock(chosenMutex);
    chosen = std::clamp(threads, 1, kMaxCpuThreads);
    chosenByUser = true;
  }
  applyCpuThreadsToOpenMp();
}

Expected<int> cpuThreads() {
  std::lock_guard<std::mutex> lock(chosenMutex);
  if (!chosen) {
    const char *text = std::getenv("SMELT_CPU_THREADS");
    chosen = text ? parseCpuThreads(text, "SMELT_CPU_THREADS") : Expected<int>(defaultCpuThreads());
    chosenByUser = text != nullptr;
  }
  return *chosen;
}

int cpuThreadsOrDefault() {
  Expected<int> threads = cpuThreads();
  return threads ? *threads : defaultCpuThreads();
}

int threadsOfThisThread() {
  if (!toldOpenMp)
    applyCpuThreadsToOpenMp();
  return omp_get_max_threads();
}

bool cpuThreadsFollowLoad() {
  (void)cpuThreads(); // resolves the choice
  std::lock_guard<std::mutex> lock(chosenMutex);
  return !chosenByUser;
}

int applyRunThreadsToOpenMp() {
  int threads = cpuThreadsOrDefault();
  if (threads > 1 && cpuThreadsFollowLoad())
    threads = threadsForLoad(threads, CpuLoad::instance().othersCores());
  // Setting the count costs OpenMP nothing when it is unchanged.
  if (!toldOpenMp || omp_get_max_threads() != threads)
    omp_set_num_threads(threads);
  toldOpenMp = true;
  return threads;
}

} // namespace smelt::rt
