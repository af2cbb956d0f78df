// `smelt devices`: the devices Smelt can use and the CUDA library versions, as
// tf.config.list_physical_devices and nvidia-smi would tell a user, with the reason when
// there is no GPU and a warning when the versions do not fit together. Given the memory flags
// of `smelt run` and `smelt train`, it also lists the logical devices they make
// (tf.config.list_logical_devices) with each one's memory policy, so a split can be checked
// before a run.
#include "tools/smelt/Commands.h"
#include "tools/smelt/Placement.h"

#include "runtime/DeviceMemory.h"
#include "runtime/Devices.h"

#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace smelt::tools {

cl::SubCommand devicesSubcommand("devices", "List cpu:0 and the GPUs, with library versions");
static MemoryFlags memoryFlags(devicesSubcommand);

int devicesCommand() {
  if (std::string error = memoryFlags.apply();
      !error.empty())
    return fail(error);
  rt::DeviceReport report = rt::discoverDevices();
  llvm::outs() << report.str();
  if (!memoryFlags.given())
    return 0;
  llvm::outs() << "\nlogical devices (as smelt run and smelt train would use them with these "
                  "flags):\n"
               << rt::logicalDeviceTable(rt::logicalDevices(report.devices));
  if (!memoryFlags.logicalGpus.empty() && !report.hasGpu())
    llvm::outs() << "--logical-gpus splits nothing: there is no GPU here\n";
  return 0;
}

} // namespace smelt::tools
