// The device choices `smelt run` and `smelt train` share: which devices exist (from device
// discovery), strict placement, TensorFlow's log_device_placement, the memory policies
// (--memory, --memory-limit, --logical-gpus), TF32 for f32 GPU matmuls (--allow-tf32) and FMA
// contraction in the GPU's fused kernels (--cuda-fmad).
#pragma once

#include "codegen/Compile.h"
#include "passes/Passes.h"
#include "runtime/Executor.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace smelt::tools {

/// The pipeline's device choices for this machine and the command line: the logical GPUs
/// (--logical-gpus; one per physical GPU without it) of the GPUs discovery finds when this
/// smelt has the CUDA back end and the GPU executor, else cpu:0 alone with the reason (no
/// driver, no GPU, built without CUDA) for the placement summary. Call it after
/// MemoryFlags::apply, which sets how GPUs are split.
PipelineOptions placementOptions(bool logDevicePlacement, bool strictPlacement);

/// When `pipeline` may place ops on a GPU: the compile also renders its fusions as CUDA for
/// the GPU's arch (after `compile`'s own hook), and the executor runs GPU segments with the
/// GPU executor. Otherwise nothing changes.
void enableGpuExecution(const PipelineOptions &pipeline, codegen::CompileOptions &compile,
                        rt::ExecutorOptions &executor);

/// The memory flags (runtime/DeviceMemory.h) of `smelt run`, `smelt train` and `smelt devices`.
/// Each command makes one in its own file: a cl::opt must be constructed after its
/// cl::SubCommand, and static initialization order across files is unspecified.
struct MemoryFlags {
  explicit MemoryFlags(llvm::cl::SubCommand &command);
  llvm::cl::opt<std::string> policy, limit, logicalGpus;

  bool given() const { return !policy.empty() || !limit.empty() || !logicalGpus.empty(); }
  /// Parses the flags and sets the process's policies; the error quotes the flag. Before
  /// placementOptions, which numbers the logical GPUs the flags make.
  std::string apply() const;
};

/// The device flags `smelt run` and `smelt train` share, made as MemoryFlags are.
struct DeviceFlags {
  explicit DeviceFlags(llvm::cl::SubCommand &command);
  llvm::cl::opt<bool> logDevicePlacement, strictPlacement, allowTf32, cudaFmad;
  MemoryFlags memory;
};

/// "memory: cpu:0 (grow): peak 3.1 MiB, ..." for every device that allocated.
void printMemoryReport(llvm::raw_ostream &os);

} // namespace smelt::tools
