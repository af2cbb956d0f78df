// GPU numerics: each shared fusion case compiled for the GPU found, run on fresh random inputs
// and compared with the same ops unfused on the CPU (the runtime's reference kernels, which
// follow docs/ops.md exactly), and run again for the same bits. Skips, saying why, without a
// driver or a device: it runs on the GPU machine through scripts/gpu-check.sh.
#include "GpuSkip.h"
#include "CudaTestUtil.h"
#include "RuntimeTestUtil.h"

#include "codegen/BuildExecutable.h"
#include "codegen/Compile.h"
#include "codegen/FusionWalk.h"
#include "passes/Passes.h"
#include "runtime/CpuExecutor.h"
#include "runtime/cuda/CudaDriver.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"

#include <cstring>
#include <deque>

namespace smelt::cuda_test {
namespace {

using rt::cuda::CudaDriver;

/// Device 0 with its primary context current (held for the process).
struct Gpu {
  const CudaDriver *cu = nullptr;
  CUdevice device = 0;
  CUcontext context = nullptr;
  std::string arch, name;
};

rt::Expected<Gpu> openGpu() {
  rt::Expected<const CudaDriver *> driver = CudaDriver::get();
  if (!driver)
    return driver.status();
  Gpu gpu;
  gpu.cu = *driver;
  const CudaDriver &cu = *gpu.cu;
  int count = 0, major = 0, minor = 0;
  char name[256] = {};
  for (rt::Status status :
       {cu.check(cu.deviceGetCount(&count), "cuDeviceGetCount"),
        count > 0 ? rt::Status() : rt::Status::error("the CUDA driver sees no device"),
        cu.check(cu.deviceGet(&gpu.device, 0), "cuDeviceGet")})
    if (!status.ok())
      return status;
  for (rt::Status status :
       {cu.check(
            cu.deviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, gpu.device),
            "cuDeviceGetAttribute(major)"),
        cu.check(
            cu.deviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, gpu.device),
            "cuDeviceGetAttribute(minor)"),
        cu.check(cu.deviceGetName(name, sizeof name - 1, gpu.device), "cuDeviceGetName"),
        cu.check(cu.primaryCtxRetain(&gpu.context, gpu.device), "cuDevicePrimaryCtxRetain"),
        cu.check(cu.ctxSetCurrent(gpu.context), "cuCtxSetCurrent")})
    if (!status.ok())
      return status;
  gpu.arch = "sm_" + std::to_string(major) + std::to_string(minor);
  gpu.name = name;
  return gpu;
}

const rt::Expected<Gpu> &gpu() {
  static const rt::Expected<Gpu> opened = openGpu();
  return opened;
}

#define ASSERT_CU(call)                                                                            \
  do {                                                                                             \
    rt::Status status_ = cu.check(call, #call);                                                    \
    ASSERT_TRUE(status_.ok()) << status_.message();                                                \
  } while (0)

/// Device memory freed however the test ends.
struct DeviceBuffer {
  const CudaDriver &cu;
  CUdeviceptr ptr = 0;
  ~DeviceBuffer() {
    if (ptr)
      cu.memFree(ptr);
  }
};

struct LoadedModule {
  const CudaDriver &cu;
  CUmodule module = nullptr;
  ~LoadedModule() {
    if (module)
      cu.moduleUnload(module);
  }
};

/// The fusion's body as a function of plain ops, built into an Executable and run on the CPU.
rt::Expected<std::vector<rt::HostTensor>> runUnfusedOnCpu(FusionOp fusion,
                                                          const std::vector<rt::HostTensor> &in) {
  mlir::Location loc = fusion.getLoc();
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::ModuleOp::create(loc);
  mlir::OpBuilder b = mlir::OpBuilder::atBlockEnd(module->getBody());
  auto function = mlir::func::FuncOp::create(
      b, loc, "reference",
      b.getFunctionType(fusion.getInputs().getTypes(), fusion.getResultTypes()));
  mlir::Block *entry = function.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  mlir::IRMapping mapping;
  mapping.map(fusion.getBody().front().getArguments(), entry->getArguments());
  for (mlir::Operation &op : fusion.getBody().front().without_terminator())
    b.clone(op, mapping);
  llvm::SmallVector<mlir::Value> results;
  for (mlir::Value value : fusion.getYield().getValues())
    results.push_back(mapping.lookup(value));
  mlir::func::ReturnOp::create(b, loc, results);
  // Each op a kernel of its own: codegen runs nothing outside a fusion.
  mlir::PassManager pm(fusion.getContext());
  pm.addPass(createFuse(FuseOptions{/*reportPath=*/"", /*oneOpPerKernel=*/true}));
  if (mlir::failed(pm.run(*module)))
    return rt::Status::error("smelt-fuse{one-op-per-kernel} fails on the unfused reference");
  mlir::FailureOr<rt::Executable> exe = codegen::buildWithKernels(function);
  if (mlir::failed(exe))
    return rt::Status::error("the unfused reference does not build");
  rt::Expected<rt::CpuExecutor> executor = rt::CpuExecutor::create(*exe);
  if (!executor)
    return executor.status();
  std::vector<rt::HostTensor> outputs;
  if (rt::Status status = executor->run(in, outputs); !status.ok())
    return status;
  return outputs;
}

TEST(CudaGpu, DeviceIsThere) {
  if (!gpu().ok())
    SMELT_SKIP_WITHOUT_GPU(gpu().message());
  std::cout << "GPU: " << gpu()->name << " (" << gpu()->arch << ")\n";
  EXPECT_FALSE(gpu()->name.empty()) << "cuDeviceGetName gave no name";
  EXPECT_TRUE(gpu()->context) << "no primary context";
  // A compute capability NVRTC can target (sm_50 and up), parsed back from the arch string.
  int capability = std::atoi(gpu()->arch.c_str() + 3);
  EXPECT_GE(capability, 50) << gpu()->arch;
  const CudaDriver &cu = *gpu()->cu;
  size_t total = 0;
  ASSERT_CU(cu.deviceTotalMem(&total, gpu()->device));
  EXPECT_GT(total, size_t(1) << 30) << "a GPU with under 1 GiB of memory";
  int version = 0;
  ASSERT_CU(cu.driverGetVersion(&version));
  EXPECT_GE(version, 12000) << "driver API version " << version << ": older than any CUDA 12";
}

class CudaGpuNumerics : public testing::TestWithParam<FusionCase> {};

TEST_P(CudaGpuNumerics, MatchesTheUnfusedOpsOnTheCpu) {
  if (!gpu().ok())
    SMELT_SKIP_WITHOUT_GPU(gpu().message());
  const CudaDriver &cu = *gpu()->cu;
  ASSERT_CU(cu.ctxSetCurrent(gpu()->context)); // this thread's, whichever ran the first test
  const FusionCase &c = GetParam();
  ParsedModule parsed = parseModule(c.mlir);
  ASSERT_TRUE(parsed.main);
  // Both ways NVRTC may round multiply-adds (--cuda-fmad): contracted into FMAs (the default)
  // or rounded as the CPU rounds them; the same tolerance holds for both.
  for (bool fmad : {true, false}) {
    SCOPED_TRACE(fmad ? "--cuda-fmad=true" : "--cuda-fmad=false");
    mlir::FailureOr<rt::CudaCode> code =
        codegen::compileCudaKernels(parsed.kernelOps, parsed.kernels, gpu()->arch, fmad);
    ASSERT_TRUE(mlir::succeeded(code));

    // CUBIN for this GPU first; PTX through the driver's JIT if the driver refuses it.
    LoadedModule loaded{cu};
    rt::Status fromCubin =
        cu.check(cu.moduleLoadData(&loaded.module, code->cubin.data()), "cuModuleLoadData(CUBIN)");
    if (!fromCubin.ok()) {
      rt::Status fromPtx =
          cu.check(cu.moduleLoadData(&loaded.module, code->ptx.c_str()), "cuModuleLoadData(PTX)");
      ASSERT_TRUE(fromPtx.ok()) << fromCubin.message() << "\n" << fromPtx.message();
    }

    for (auto [k, fusion] : llvm::enumerate(parsed.fusions)) {
      const rt::FusedKernel &kernel = parsed.kernels[k];
      std::vector<rt::HostTensor> inputs;
      for (mlir::Value input : fusion.getInputs())
        inputs.push_back(caseInput(c, codegen::elementDType(input),
                                   mlir::cast<mlir::RankedTensorType>(input.getType()).getShape()));
      rt::Expected<std::vector<rt::HostTensor>> reference = runUnfusedOnCpu(fusion, inputs);
      ASSERT_TRUE(reference.ok()) << reference.message();

      std::deque<DeviceBuffer> buffers;
      std::vector<CUdeviceptr> pointers;
      for (const rt::HostTensor &tensor : inputs) {
        DeviceBuffer &buffer = buffers.emplace_back(DeviceBuffer{cu});
        ASSERT_CU(cu.memAlloc(&buffer.ptr, std::max<size_t>(tensor.byteSize(), 1)));
        ASSERT_CU(cu.memcpyHtoD(buffer.ptr, tensor.raw(), tensor.byteSize()));
        pointers.push_back(buffer.ptr);
      }
      for (const rt::HostTensor &tensor : *reference) {
        DeviceBuffer &buffer = buffers.emplace_back(DeviceBuffer{cu});
        ASSERT_CU(cu.memAlloc(&buffer.ptr, std::max<size_t>(tensor.byteSize(), 1)));
        pointers.push_back(buffer.ptr);
      }
      std::vector<void *> params;
      for (CUdeviceptr &pointer : pointers)
        params.push_back(&pointer);
      CUfunction function = nullptr;
      ASSERT_CU(cu.moduleGetFunction(&function, loaded.module, kernel.name.c_str()));
      // Launched twice, into results poisoned before each: the second must give the first's
      // bits (a split reduction's last block, whichever it is, combines the partials in one
      // order, and the first launch left its count at 0 for the next).
      std::vector<rt::HostTensor> first;
      for (int run = 0; run < 2; ++run) {
        for (size_t j = 0; j < reference->size(); ++j)
          ASSERT_CU(cu.memsetD8Async(pointers[inputs.size() + j], run ? 0xa5 : 0x5a,
                                     (*reference)[j].byteSize(), nullptr));
        ASSERT_CU(cu.launchKernel(function, unsigned(kernel.cudaGrid), 1, 1,
                                  unsigned(kernel.cudaBlock), 1, 1, 0, nullptr, params.data(),
                                  nullptr));
        ASSERT_CU(cu.ctxSynchronize());
        for (size_t j = 0; j < reference->size(); ++j) {
          rt::HostTensor got = rt::HostTensor::zeros((*reference)[j].type());
          ASSERT_CU(cu.memcpyDtoH(got.raw(), pointers[inputs.size() + j], got.byteSize()));
          std::string what = kernel.name + " result #" + std::to_string(j);
          if (run == 0) {
            expectDeviceResultMatches(got, (*reference)[j], what);
            first.push_back(std::move(got));
          } else {
            EXPECT_EQ(std::memcmp(got.raw(), first[j].raw(), got.byteSize()), 0)
                << what << " differs between two launches";
          }
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, CudaGpuNumerics, testing::ValuesIn(fusionCases()),
                         [](const testing::TestParamInfo<FusionCase> &info) {
                           return std::string(info.param.name);
                         });

} // namespace
} // namespace smelt::cuda_test
