// oneDNN engine, stream and error translation.
#include "runtime/cpu/OneDnn.h"

#include <fmt/format.h>

namespace smelt::rt::cpu {

dnnl::engine &oneDnnEngine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream &oneDnnStream() {
  static dnnl::stream stream(oneDnnEngine());
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
