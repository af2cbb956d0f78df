// Host-device traffic as the tools print it (Transfers.h).
#include "runtime/Transfers.h"

#include "runtime/Allocator.h"

#include <fmt/format.h>

namespace smelt::rt {

std::string TransferStats::str() const {
  return fmt::format("{} up, {} down, {} host sync{}", formatBytes(toDevice), formatBytes(toHost),
                     hostSyncs, hostSyncs == 1 ? "" : "s");
}

std::string TransferStats::launchStr() const {
  return fmt::format("{} CUDA graph{}, {} single launch{}", graphLaunches,
                     graphLaunches == 1 ? "" : "s", stepLaunches, stepLaunches == 1 ? "" : "es");
}

} // namespace smelt::rt
