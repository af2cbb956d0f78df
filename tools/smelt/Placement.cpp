// Device options shared by the run and train subcommands (Placement.h).
#include "tools/smelt/Placement.h"

#include "runtime/Devices.h"

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

} // namespace smelt::tools
