// The process's oneDNN CPU engine and stream, and a checked way to build primitives.
#pragma once

#include "runtime/Status.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace smelt::rt::cpu {

dnnl::engine &oneDnnEngine();
dnnl::stream &oneDnnStream();

/// Runs `build` and turns a dnnl::error into a Status that says which step it was for.
Status oneDnnChecked(const std::string &what, const std::function<void()> &build);

/// One step's oneDNN primitive, made for each OpenMP thread count it runs under. oneDNN splits
/// a primitive's work by the calling thread's count when the primitive is made, and runs it on
/// that many threads whatever the count is later; a run on fewer threads (the count follows
/// other processes' load, CpuThreads.h) needs one made under that count. The first is made at
/// once, so that a primitive oneDNN rejects is the step's error; the others on first use.
class PrimitivePerThreads {
public:
  static Expected<PrimitivePerThreads> create(const std::string &what,
                                              std::function<dnnl::primitive()> make);
  /// The primitive for the calling thread's OpenMP count (omp_get_max_threads()); should
  /// oneDNN refuse one for that count, the first one made, which is as correct and only
  /// divides the work otherwise.
  const dnnl::primitive &current() const;
  /// How many counts it holds a primitive for.
  size_t made() const;

private:
  struct State {
    std::mutex mutex;
    std::function<dnnl::primitive()> make;
    std::map<int, dnnl::primitive> byThreads;
    const dnnl::primitive *first = nullptr;
  };
  std::shared_ptr<State> state_;
};

} // namespace smelt::rt::cpu
