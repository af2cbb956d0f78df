// Device options shared by the run and train subcommands (Placement.h).
#include "tools/smelt/Placement.h"

#include "tools/smelt/Commands.h"

#include "codegen/ValueLimit.h"
#include "runtime/Allocator.h"
#include "runtime/DeviceMemory.h"
#include "runtime/Devices.h"

#if SMELT_HAVE_CUDA_CODEGEN && SMELT_HAVE_GPU_EXECUTOR
#include "codegen/cuda/CudaCodegen.h"
#include "runtime/cuda/GpuRunner.h"
constexpr bool kCanRunOnGpu = true;
#else
constexpr bool kCanRunOnGpu = false;
#endif

#include <sstream>

namespace smelt::tools {

namespace {

/// This machine's devices, looked up once per process.
const rt::DeviceReport &machine() {
  static const rt::DeviceReport report = rt::discoverDevices(/*libraryVersions=*/false);
  return report;
}

/// "cpu:0,gpu:0,gpu:1": what smelt-place-devices' `devices` option takes.
std::string deviceList(const std::vector<rt::LogicalDevice> &devices) {
  std::string list;
  for (const rt::LogicalDevice &device : devices)
    list += (list.empty() ? "" : ",") + device.info.name;
  return list;
}

} // namespace

PipelineOptions placementOptions(bool logDevicePlacement, bool strictPlacement) {
  const rt::DeviceReport &devices = machine();
  PipelineOptions options;
  options.devices = "cpu:0";
  if (!devices.hasGpu())
    options.noGpuReason = devices.noGpuReason;
  else if (!kCanRunOnGpu)
    options.noGpuReason = "found " + devices.devices[1].name + " (" +
                          devices.devices[1].description +
                          ") but this smelt was built without the CUDA back end or the GPU "
                          "executor";
  else
    options.devices = deviceList(rt::logicalDevices(devices.devices));
  options.logDevicePlacement = logDevicePlacement;
  options.strictPlacement = strictPlacement;
  return options;
}

mlir::LogicalResult checkValuesFitDevices(mlir::func::FuncOp function,
                                          const PipelineOptions &pipeline,
                                          const rt::Executable &exe) {
  return codegen::checkValuesFit(
      function, exe,
      codegen::largestDeviceLimit(rt::logicalDevices(machine().devices), pipeline.devices));
}

void enableGpuExecution(const PipelineOptions &pipeline, codegen::CompileOptions &compile,
                        rt::ExecutorOptions &executor) {
  if (pipeline.devices.find("gpu:") == std::string::npos)
    return;
#if SMELT_HAVE_CUDA_CODEGEN && SMELT_HAVE_GPU_EXECUTOR
  compile.cudaArch = rt::lowestGpuArch(machine().devices);
  executor.gpuRunner = rt::cuda::gpuSegmentRunner;
#else
  (void)compile, (void)executor;
#endif
}

MemoryFlags::MemoryFlags(llvm::cl::SubCommand &command)
    : policy("memory",
             llvm::cl::desc("How devices take memory: 'grow' (default: as buffers need it) or "
                            "'preallocate[=FRACTION]' (FRACTION of each device, default 0.9, at "
                            "first use)"),
             llvm::cl::value_desc("grow|preallocate[=f]"), llvm::cl::sub(command),
             llvm::cl::cat(smeltCategory())),
      limit("memory-limit",
            llvm::cl::desc("The most memory a device may hold: SIZE for every device, or "
                           "DEVICE=SIZE,... (e.g. 2GiB, or cpu:0=1GiB,gpu:0=8GiB); running out "
                           "fails with the buffer named"),
            llvm::cl::value_desc("size|device=size,..."), llvm::cl::sub(command),
            llvm::cl::cat(smeltCategory())),
      logicalGpus("logical-gpus",
                  llvm::cl::desc("Split gpu:0 into logical GPUs with these memory limits (e.g. "
                                 "4GiB,4GiB); other GPUs follow them in numbering"),
                  llvm::cl::value_desc("size,size,..."), llvm::cl::sub(command),
                  llvm::cl::cat(smeltCategory())) {}

std::string MemoryFlags::apply() const {
  rt::Expected<rt::MemoryConfig> config = rt::parseMemoryFlags(policy, limit, logicalGpus);
  if (!config)
    return config.message();
  rt::Status configured = rt::configureMemory(*config);
  return configured.ok() ? "" : configured.message();
}

DeviceFlags::DeviceFlags(llvm::cl::SubCommand &command)
    : logDevicePlacement("log-device-placement",
                         llvm::cl::desc("Print the device of every op as it is placed"),
                         llvm::cl::sub(command), llvm::cl::cat(smeltCategory())),
      strictPlacement("strict-placement",
                      llvm::cl::desc("Fail when an op cannot run on the device it asks for, "
                                     "instead of using cpu:0"),
                      llvm::cl::sub(command), llvm::cl::cat(smeltCategory())),
      allowTf32("allow-tf32",
                llvm::cl::desc("Let f32 matmuls and convolutions on a GPU use TF32 tensor cores "
                               "(10-bit mantissa; TensorFlow's "
                               "enable_tensor_float_32_execution). Off: full f32"),
                llvm::cl::sub(command), llvm::cl::cat(smeltCategory())),
      cudaFmad("cuda-fmad",
               llvm::cl::desc("Let NVRTC contract a multiply and an add in the GPU's fused "
                              "kernels into one FMA, rounded once (default: on). Off: rounded "
                              "as the CPU kernels round"),
               llvm::cl::init(true), llvm::cl::sub(command), llvm::cl::cat(smeltCategory())),
      cudaGraphs("cuda-graphs",
                 llvm::cl::desc("Queue a GPU segment's steps as one CUDA graph from its second "
                                "run on, replayed while its buffers' addresses repeat (default: "
                                "on). Off: one launch per step"),
                 llvm::cl::init(true), llvm::cl::sub(command), llvm::cl::cat(smeltCategory())),
      memory(command) {}

void printMemoryReport(llvm::raw_ostream &os) {
  std::istringstream lines(rt::memoryReport());
  for (std::string line; std::getline(lines, line);)
    os << "memory: " << line << "\n";
}

} // namespace smelt::tools
