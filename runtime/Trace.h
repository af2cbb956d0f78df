// A profile in Chrome's trace event format (JSON), which Perfetto and chrome://tracing open:
// compile phases, every kernel, library call and copy with its device and stream, and memory
// counters. The compiler and the executor record into one Trace; `--profile trace.json`
// writes it. Thread-safe: executor threads and the compiler may record at once.
#pragma once

#include "runtime/Status.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace smelt::rt {

class Trace {
public:
  using Clock = std::chrono::steady_clock;

  /// Where events are drawn: a process per device ("compiler", "cpu:0", "gpu:0"), a thread
  /// per stream or phase within it.
  struct Track {
    std::string process;
    std::string thread;
  };

  Trace();

  /// Microseconds since the trace began, now or at `time`.
  double now() const { return at(Clock::now()); }
  double at(Clock::time_point time) const;
  /// A span [start, start + duration) in microseconds, with string arguments shown when the
  /// event is selected (op, shapes, bytes ...).
  void span(const Track &track, const std::string &name, const std::string &category,
            double startMicros, double durationMicros,
            const std::map<std::string, std::string> &args = {});
  /// A counter sample ("memory": {"in use": ..., "peak": ...}).
  void counter(const std::string &process, const std::string &name, double atMicros,
               const std::map<std::string, double> &values);

  size_t eventCount() const;
  std::string json() const;
  /// Writes json() to `path` (atomically: temp file, then rename).
  Status write(const std::string &path) const;

  /// Records a span from construction to destruction.
  class Scope {
  public:
    Scope(Trace *trace, Track track, std::string name, std::string category,
          std::map<std::string, std::string> args = {});
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Trace *trace_;
    Track track_;
    std::string name_, category_;
    std::map<std::string, std::string> args_;
    double start_;
  };

private:
  struct Event {
    char phase; // 'X' span, 'C' counter
    int pid, tid;
    std::string name, category;
    double ts, dur;
    std::map<std::string, std::string> args;
    std::map<std::string, double> values;
  };
  std::pair<int, int> ids(const Track &track);

  Clock::time_point start_;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::map<std::string, int> processes_;
  std::map<std::pair<int, std::string>, int> threads_;
};

} // namespace smelt::rt
