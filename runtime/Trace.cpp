// The Chrome trace writer: events, process and thread names as metadata events, JSON out.
#include "runtime/Trace.h"

#include "runtime/FileIO.h"

#include <nlohmann/json.hpp>


namespace smelt::rt {

Trace::Trace() : start_(Clock::now()) {}

double Trace::at(Clock::time_point time) const {
  return std::chrono::duration<double, std::micro>(time - start_).count();
}

std::pair<int, int> Trace::ids(const Track &track) {
  auto [p, newProcess] = processes_.try_emplace(track.process, int(processes_.size()) + 1);
  auto [t, newThread] =
      threads_.try_emplace({p->second, track.thread}, int(threads_.size()) + 1);
  return {p->second, t->second};
}

void Trace::span(const Track &track, const std::string &name, const std::string &category,
                 double startMicros, double durationMicros,
                 const std::map<std::string, std::string> &args) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [pid, tid] = ids(track);
  events_.push_back({'X', pid, tid, name, category, startMicros, durationMicros, args, {}});
}

void Trace::counter(const std::string &process, const std::string &name, double atMicros,
                    const std::map<std::string, double> &values) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [pid, tid] = ids({process, "counters"});
  events_.push_back({'C', pid, tid, name, "memory", atMicros, 0, {}, values});
}

size_t Trace::eventCount() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return events_.size();
}

std::string Trace::json() const {
  std::lock_guard<std::mutex> lock(mutex_);
  nlohmann::json events = nlohmann::json::array();
  // Metadata events name the processes (devices) and threads (streams) in the viewer.
  for (const auto &[name, pid] : processes_)
    events.push_back({{"ph", "M"}, {"pid", pid}, {"tid", 0}, {"name", "process_name"},
                      {"args", {{"name", name}}}});
  for (const auto &[key, tid] : threads_)
    events.push_back({{"ph", "M"}, {"pid", key.first}, {"tid", tid}, {"name", "thread_name"},
                      {"args", {{"name", key.second}}}});
  for (const Event &e : events_) {
    nlohmann::json event = {{"ph", std::string(1, e.phase)}, {"pid", e.pid}, {"tid", e.tid},
                            {"name", e.name}, {"cat", e.category}, {"ts", e.ts}};
    if (e.phase == 'X') {
      event["dur"] = e.dur;
      if (!e.args.empty())
        event["args"] = e.args;
    } else {
      event["args"] = e.values;
    }
    events.push_back(std::move(event));
  }
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
}

Status Trace::write(const std::string &path) const {
  std::string text = json();
  Status status = writeFileAtomically(path, [&](int fd, const std::string &tmp) {
    return writeAll(fd, text.data(), text.size(), tmp);
  });
  return status.ok() ? status
                     : Status::error(path + ": cannot write the trace: " + status.message());
}

Trace::Scope::Scope(Trace *trace, Track track, std::string name, std::string category,
                    std::map<std::string, std::string> args)
    : trace_(trace), track_(std::move(track)), name_(std::move(name)),
      category_(std::move(category)), args_(std::move(args)),
      start_(trace ? trace->now() : 0) {}

Trace::Scope::~Scope() {
  if (trace_)
    trace_->span(track_, name_, category_, start_, trace_->now() - start_, args_);
}

} // namespace smelt::rt
