// How messages name a step, and the parameter check every family uses.
#include "runtime/cpu/Kernels.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace smelt::rt::cpu {

std::string describe(const Step &step) {
  return step.location.empty() ? fmt::format("'{}'", step.name())
                               : fmt::format("'{}' ({})", step.name(), step.location);
}

Status expectCount(const Step &step, const char *name, const std::vector<int64_t> &values,
                   size_t count) {
  if (values.size() == count)
    return Status();
  return Status::error(fmt::format("{}: {} = [{}] needs {} values", describe(step), name,
                                   fmt::join(values, ", "), count));
}

} // namespace smelt::rt::cpu
