// The device choices `smelt run` and `smelt train` share: which devices exist (from device
// discovery), strict placement, TensorFlow's log_device_placement, the memory policies
// (--memory, --memory-limit, --logical-gpus), TF32 for f32 GPU matmuls (--allow-tf32) and FMA
// contraction in the GPU's fused kernels (--cuda-fmad); and the check, which `smelt bench` runs
// too, that no value a function computes is larger than every device's memory.
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

/// Success when every value `function` computes (op results, fusion bodies included) fits the
/// memory limit of one of the devices `pipeline` may place ops on; else an error at the first
/// op computing a larger one, naming its type, its size and the largest limit. A fused value is
/// never stored, so no buffer check sees it, but a value that large could not run unfused and
/// runs for minutes fused (an rng of 1e11 elements summed to a scalar): it is refused as a
/// buffer that large is. Call it after compiling `function` into `exe`, and after
/// MemoryFlags::apply: a buffer of `exe` past the limit is left to the executor, which names
/// it.
mlir::LogicalResult checkValuesFitDevices(mlir::func::FuncOp function,
                                          const PipelineOptions &pipeline,
                                          const rt::Executable &exe);

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
  llvm::cl::opt<bool> logDevicePlacement, strictPlacement, allowTf32, cudaFmad, cudaGraphs;
  MemoryFlags memory;
};

/// "memory: cpu:0 (grow): peak 3.1 MiB, ..." for every device that allocated.
void printMemoryReport(llvm::raw_ostream &os);

} // namespace smelt::tools
