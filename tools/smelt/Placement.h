// The device choices `smelt run` and `smelt train` share: which devices exist (from device
// discovery), strict placement, and TensorFlow's log_device_placement. Each command declares
// the two flags itself (a cl::opt must be in the file of its cl::SubCommand: static
// initialization order across files is unspecified).
#pragma once

#include "passes/Passes.h"

#include "llvm/Support/CommandLine.h"

namespace smelt::tools {

/// The pipeline's device choices for this machine and the command line. Only cpu:0 executes
/// today: a GPU that discovery finds is named in the reason, not given ops.
PipelineOptions placementOptions(bool logDevicePlacement, bool strictPlacement);

/// Help texts of the two flags, one wording for both commands.
inline constexpr const char *kLogDevicePlacementHelp =
    "Print the device of every op as it is placed";
inline constexpr const char *kStrictPlacementHelp =
    "Fail when an op cannot run on the device it asks for, instead of using cpu:0";

} // namespace smelt::tools
