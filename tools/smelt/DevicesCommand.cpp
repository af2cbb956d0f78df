// `smelt devices`: the devices Smelt can use and the CUDA library versions, as
// tf.config.list_physical_devices and nvidia-smi would tell a user, with the reason when
// there is no GPU and a warning when the versions do not fit together.
#include "tools/smelt/Commands.h"

#include "runtime/Devices.h"

#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

namespace smelt::tools {

cl::SubCommand devicesSubcommand("devices", "List cpu:0 and the GPUs, with library versions");

int devicesCommand() {
  llvm::outs() << rt::discoverDevices().str();
  return 0;
}

} // namespace smelt::tools
