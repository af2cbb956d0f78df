// Device options shared by the run and train subcommands (Placement.h).
#include "tools/smelt/Placement.h"

#include "runtime/DeviceMemory.h"
#include "runtime/Devices.h"

#include <sstream>

namespace smelt::tools {

PipelineOptions placementOptions(bool logDevicePlacement, bool strictPlacement) {
  rt::DeviceReport devices = rt::discoverDevices(/*libraryVersions=*/false);
  PipelineOptions options;
  options.devices = "cpu:0";
  // The executor runs on the host only; saying so beats placing ops on a GPU nothing drives.
  options.noGpuReason = devices.hasGpu()
                            ? "found " + devices.devices[1].name + " (" +
                                  devices.devices[1].description +
                                  ") but Smelt does not execute on GPUs yet"
                            : devices.noGpuReason;
  options.logDevicePlacement = logDevicePlacement;
  options.strictPlacement = strictPlacement;
  return options;
}

std::string applyMemoryFlags(const std::string &memory, const std::string &limit,
                             const std::string &logicalGpus) {
  rt::Expected<rt::MemoryConfig> config = rt::parseMemoryFlags(memory, limit, logicalGpus);
  if (!config)
    return config.message();
  rt::Status configured = rt::configureMemory(*config);
  return configured.ok() ? "" : configured.message();
}

void printMemoryReport(llvm::raw_ostream &os) {
  std::istringstream lines(rt::memoryReport());
  for (std::string line; std::getline(lines, line);)
    os << "memory: " << line << "\n";
}

} // namespace smelt::tools
