// oneDNN engine, stream and error translation.
#include "runtime/cpu/OneDnn.h"

#include "runtime/CpuThreads.h"

#include <fmt/format.h>

namespace smelt::rt::cpu {

dnnl::engine &oneDnnEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream &oneDnnStream() {
  // One per thread: data-parallel replicas in one process run their steps on their own
  // threads, and a oneDNN stream is not meant to be shared between threads. Each such thread
  // first tells OpenMP the process's thread count, which oneDNN sizes its work by.
  thread_local dnnl::stream stream = [] {
    applyCpuThreadsToOpenMp();
    return dnnl::stream(oneDnnEngine());
  }();
  return stream;
}

Status oneDnnChecked(const std::string &what, const std::function<void()> &build) {
  try {
    build();
  } catch (const dnnl::error &e) {
    return Status::error(fmt::format("{}: oneDNN rejected the primitive: {} (status {})", what,
                                     e.what(), int(e.status)));
  }
  return Status();
}

} // namespace smelt::rt::cpu
