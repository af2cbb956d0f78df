// oneDNN engine, stream and error translation.
#include "runtime/cpu/OneDnn.h"

#include "runtime/CpuThreads.h"

#include <fmt/format.h>
#include <omp.h>

namespace smelt::rt::cpu {

dnnl::engine &oneDnnEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream &oneDnnStream() {
  // One per thread: data-parallel replicas in one process run their steps on their own
  // threads, and a oneDNN stream is not meant to be shared between threads. Each such thread
  // has told OpenMP its thread count (the executor's run, else the process's), which oneDNN
  // sizes its work by.
  thread_local dnnl::stream stream = [] {
    (void)threadsOfThisThread();
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

Expected<PrimitivePerThreads> PrimitivePerThreads::create(const std::string &what,
                                                          std::function<dnnl::primitive()> make) {
  PrimitivePerThreads result;
  result.state_ = std::make_shared<State>();
  State &state = *result.state_;
  dnnl::primitive first;
  SMELT_RETURN_IF_ERROR(oneDnnChecked(what, [&] { first = make(); }));
  state.make = std::move(make);
  state.first = &state.byThreads.emplace(omp_get_max_threads(), std::move(first)).first->second;
  return result;
}

const dnnl::primitive &PrimitivePerThreads::current() const {
  State &state = *state_;
  int threads = omp_get_max_threads();
  std::lock_guard<std::mutex> lock(state.mutex);
  if (auto found = state.byThreads.find(threads); found != state.byThreads.end())
    return found->second;
  dnnl::primitive made;
  try {
    made = state.make();
  } catch (const dnnl::error &) {
    made = *state.first; // a handle: the same primitive, asked for once
  }
  return state.byThreads.emplace(threads, std::move(made)).first->second;
}

size_t PrimitivePerThreads::made() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->byThreads.size();
}

} // namespace smelt::rt::cpu
