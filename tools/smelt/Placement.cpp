// Device options shared by the run and train subcommands (Placement.h).
#include "tools/smelt/Placement.h"

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
    options.devices = devices.deviceList();
  options.logDevicePlacement = logDevicePlacement;
  options.strictPlacement = strictPlacement;
  return options;
}

void enableGpuExecution(const PipelineOptions &pipeline, codegen::CompileOptions &compile,
                        rt::ExecutorOptions &executor) {
  if (pipeline.devices.find("gpu:") == std::string::npos)
    return;
#if SMELT_HAVE_CUDA_CODEGEN && SMELT_HAVE_GPU_EXECUTOR
  const rt::DeviceInfo &gpu = machine().devices.at(1);
  std::string arch = "sm_" + std::to_string(gpu.computeMajor) + std::to_string(gpu.computeMinor);
  compile.extend = codegen::withCudaKernels(arch, compile.extend);
  executor.gpuRunner = rt::cuda::gpuSegmentRunner;
#else
  (void)compile, (void)executor;
#endif
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
