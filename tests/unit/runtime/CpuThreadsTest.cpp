// The CPU thread count: SMELT_CPU_THREADS / --cpu-threads parsing with messages that name the
// value, cgroup v2 quotas read from fake hierarchies, and a default within the affinity mask.
#include "RuntimeTestUtil.h"

#include "runtime/CpuLoad.h"
#include "runtime/CpuThreads.h"

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <thread>

namespace smelt::rt::test {
namespace {

TEST(CpuThreads, ParsesWholeCountsInRange) {
  for (auto [text, want] : {std::pair{"1", 1}, {"2", 2}, {"16", 16}, {"1024", 1024}}) {
    Expected<int> got = parseCpuThreads(text, "SMELT_CPU_THREADS");
    ASSERT_TRUE(got) << text << ": " << got.message();
    EXPECT_EQ(*got, want);
  }
}

TEST(CpuThreads, BadCountsAreErrorsNamingTheSourceAndValue) {
  for (const char *text : {"", "0", "-2", "two", "2x", " 2", "2.5", "1025", "99999999999999"}) {
    Expected<int> got = parseCpuThreads(text, "--cpu-threads");
    ASSERT_FALSE(got) << "'" << text << "' was accepted as " << *got;
    EXPECT_NE(got.message().find("--cpu-threads"), std::string::npos) << got.message();
    EXPECT_NE(got.message().find(text), std::string::npos) << got.message();
    EXPECT_NE(got.message().find("1 to 1024"), std::string::npos) << got.message();
  }
}

// /proc/stat's per-CPU lines: user nice system idle iowait irq softirq steal guest guest_nice.
// Busy is everything but idle, iowait and niced time (guest time is inside user already).
TEST(CpuLoad, BusyTicksAreReadForTheCpusAskedForOnly) {
  const char *stat = "cpu  900 0 300 5000 10 0 0 0 0 0\n"
                     "cpu0 100 1 20 3000 5 2 3 4 50 0\n"
                     "cpu1 800 0 280 2000 5 0 0 0 0 0\n"
                     "cpu10 7 0 0 1 0 0 0 0 0 0\n"
                     "intr 12345 0 0\n"
                     "ctxt 999\n";
  EXPECT_EQ(busyTicksOf(stat, {0}), 100u + 20 + 2 + 3 + 4);
  EXPECT_EQ(busyTicksOf(stat, {1}), 1080u);
  EXPECT_EQ(busyTicksOf(stat, {0, 1, 10}), 129u + 1080 + 7);
  EXPECT_EQ(busyTicksOf(stat, {2}), 0u);
  EXPECT_EQ(busyTicksOf("cpu0 12\ncpu1\ngarbage", {0, 1}), 12u) << "short lines count what they hold";
}

// Half a CPU kept busy by others costs a thread (the one that would share that CPU and hold
// every barrier back); the count never drops below one or rises above the chosen one.
TEST(CpuLoad, ThreadsFollowTheCpusOthersKeepBusy) {
  EXPECT_EQ(threadsForLoad(2, 0.0), 2);
  EXPECT_EQ(threadsForLoad(2, 0.3), 2);
  EXPECT_EQ(threadsForLoad(2, 0.5), 1);
  EXPECT_EQ(threadsForLoad(2, 1.0), 1);
  EXPECT_EQ(threadsForLoad(2, 6.0), 1);
  EXPECT_EQ(threadsForLoad(16, 3.4), 13);
  EXPECT_EQ(threadsForLoad(16, -1.0), 16);
  EXPECT_EQ(threadsForLoad(16, std::nan("")), 16);
  EXPECT_EQ(threadsForLoad(1, 0.0), 1);
}

// The monitor on this machine: a window of 50 ms, first none measured, then a share of the
// CPUs that cannot exceed how many there are.
TEST(CpuLoad, MeasuresOthersOverWholeWindows) {
  CpuLoad load(std::chrono::milliseconds(50));
  EXPECT_EQ(load.othersCores(), 0.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  double others = load.othersCores();
  EXPECT_GE(others, 0.0);
  EXPECT_LE(others, double(std::thread::hardware_concurrency()) + 0.5);
}

// A job shorter than a window (50 steps of 4 ms) still runs by an estimate: watched from when
// its executor is made, the first window gives one 2/5 of the way in. Another process spins on
// this process's CPUs meanwhile, so the estimate is at least half a CPU whatever else runs.
TEST(CpuLoad, FirstEstimateComesBeforeAWholeWindow) {
  CpuLoad load(std::chrono::milliseconds(500));
  load.watch();
  pid_t spinner = fork();
  ASSERT_GE(spinner, 0);
  if (spinner == 0) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(400);
    while (std::chrono::steady_clock::now() < end) {
    }
    _exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  double others = load.othersCores();
  waitpid(spinner, nullptr, 0);
  EXPECT_GE(others, 0.5) << "the spinning process is not seen before a whole window";
  EXPECT_LE(others, double(std::thread::hardware_concurrency()) + 0.5);
}

TEST(CpuThreads, CpuMaxQuotasRoundUpAndMaxIsNoLimit) {
  EXPECT_EQ(cpuQuotaFromCpuMax("max 100000\n"), 0);
  EXPECT_EQ(cpuQuotaFromCpuMax("200000 100000\n"), 2);
  EXPECT_EQ(cpuQuotaFromCpuMax("150000 100000\n"), 2);
  EXPECT_EQ(cpuQuotaFromCpuMax("50000 100000\n"), 1);
  EXPECT_EQ(cpuQuotaFromCpuMax(""), 0);
  EXPECT_EQ(cpuQuotaFromCpuMax("garbage"), 0);
}

/// Writes `text` to `path`, making its directories.
void writeFile(const std::string &path, const std::string &text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

TEST(CpuThreads, CgroupLimitIsTheSmallestQuotaFromTheProcessUpToTheRoot) {
  TempDir root;
  writeFile(root.file("cpu.max"), "max 100000\n");
  writeFile(root.file("kubepods/cpu.max"), "400000 100000\n");
  writeFile(root.file("kubepods/pod1/cpu.max"), "max 100000\n");
  writeFile(root.file("kubepods/pod1/job/cpu.max"), "250000 100000\n");
  const char *v1Too = "12:cpu,cpuacct:/kubepods/pod1/job\n0::/kubepods/pod1/job\n";
  EXPECT_EQ(cgroupCpuLimit(root.path(), v1Too), 3);
  EXPECT_EQ(cgroupCpuLimit(root.path(), "0::/kubepods/pod1\n"), 4);
  EXPECT_EQ(cgroupCpuLimit(root.path(), "0::/\n"), 0);
  // A container without its own cgroup namespace: the path is not under the mount.
  writeFile(root.file("cpu.max"), "100000 100000\n");
  EXPECT_EQ(cgroupCpuLimit(root.path(), "0::/system.slice/docker-1.scope\n"), 1);
  // cgroup v1 only, or nothing readable: no limit.
  EXPECT_EQ(cgroupCpuLimit(root.path(), "4:cpu:/\n"), 0);
  EXPECT_EQ(cgroupCpuLimit(root.path() + "/absent", "0::/\n"), 0);
}

TEST(CpuThreads, DefaultIsWithinTheAffinityMask) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  int threads = defaultCpuThreads();
  EXPECT_GE(threads, 1);
  EXPECT_LE(threads, CPU_COUNT(&set));
}

} // namespace
} // namespace smelt::rt::test
