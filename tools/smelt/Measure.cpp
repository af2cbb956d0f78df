// Measure.h: medians and the peak resident set.
#include "tools/smelt/Measure.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace smelt::tools {

double median(std::vector<double> values) {
  if (values.empty())
    return 0;
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

namespace {
size_t floorOfPeak = 0;

size_t highWaterMark() {
  // VmHWM is this program's own peak. getrusage's ru_maxrss is not: Linux carries it across
  // exec, so a smelt started by a large process (a Python benchmark) would report that
  // process's peak.
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0)
      return size_t(std::stoull(line.substr(6))) * 1024; // "VmHWM:   123456 kB"
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return size_t(usage.ru_maxrss) * 1024; // kilobytes on Linux
}
} // namespace

size_t peakResidentBytes() { return std::max(floorOfPeak, highWaterMark()); }

void leaveOutOfPeak(size_t peakBefore) {
  // "5" resets the peak resident set to the present one (Linux 4.0, proc(5)).
  std::ofstream clear("/proc/self/clear_refs");
  if (clear << "5" << std::flush)
    floorOfPeak = std::max(floorOfPeak, peakBefore);
}

} // namespace smelt::tools
