// The device choices `smelt run` and `smelt train` share: which devices exist (from device
// discovery), strict placement, TensorFlow's log_device_placement, and the memory policies
// (--memory, --memory-limit, --logical-gpus). Each command declares the flags itself (a
// cl::opt must be in the file of its cl::SubCommand: static initialization order across files
// is unspecified).
#pragma once

#include "codegen/Compile.h"
#include "passes/Passes.h"
#include "runtime/Executor.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace smelt::tools {

/// The pipeline's device choices for this machine and the command line: the GPUs discovery
/// finds when this smelt has the CUDA back end and the GPU executor, else cpu:0 alone with the
/// reason (no driver, no GPU, built without CUDA) for the placement summary.
PipelineOptions placementOptions(bool logDevicePlacement, bool strictPlacement);

/// When `pipeline` may place ops on a GPU: the compile also renders its fusions as CUDA for
/// the GPU's arch (after `compile`'s own hook), and the executor runs GPU segments with the
/// GPU executor. Otherwise nothing changes.
void enableGpuExecution(const PipelineOptions &pipeline, codegen::CompileOptions &compile,
                        rt::ExecutorOptions &executor);

/// Help texts of the two flags, one wording for both commands.
inline constexpr const char *kLogDevicePlacementHelp =
    "Print the device of every op as it is placed";
inline constexpr const char *kStrictPlacementHelp =
    "Fail when an op cannot run on the device it asks for, instead of using cpu:0";

/// Parses the memory flags and sets the process's policies (runtime/DeviceMemory.h); the
/// error quotes the flag.
std::string applyMemoryFlags(const std::string &memory, const std::string &limit,
                             const std::string &logicalGpus);
/// "memory: cpu:0 (grow): peak 3.1 MiB, ..." for every device that allocated.
void printMemoryReport(llvm::raw_ostream &os);

inline constexpr const char *kMemoryHelp =
    "How devices take memory: 'grow' (default: as buffers need it) or 'preallocate[=FRACTION]' "
    "(FRACTION of each device, default 0.9, at first use)";
inline constexpr const char *kMemoryLimitHelp =
    "The most memory a device may hold: SIZE for every device, or DEVICE=SIZE,... "
    "(e.g. 2GiB, or cpu:0=1GiB,gpu:0=8GiB); running out fails with the buffer named";
inline constexpr const char *kLogicalGpusHelp =
    "Split gpu:0 into logical GPUs with these memory limits (e.g. 4GiB,4GiB); other GPUs "
    "follow them in numbering";

} // namespace smelt::tools
