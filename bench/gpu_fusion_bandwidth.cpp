// GPU bandwidth of a fused elementwise chain against a device-to-device copy (issue 4): the
// 6-op chain of ElementwiseChain.h over 16M, 64M and 256M f32, compiled as the tools compile it
// (placed on gpu:0, fused by smelt-fuse, rendered and compiled by NVRTC) and launched straight
// from its module on device buffers, against cuMemcpyDtoDAsync of the same bytes. Both read and
// write each byte once, so the copy is the ceiling; the target is >= 85% of it. A sample is a
// burst of 20 back-to-back launches (or copies) timed from the first to the stream's
// synchronize; the median of 7 samples is reported, after one warm-up burst.
//   ninja -C build smelt-bench-gpu-bandwidth && build/bin/smelt-bench-gpu-bandwidth
// Without a GPU it prints why and exits 77, the skip code. Numbers go in bench/RESULTS.md.
#include "bench/ElementwiseChain.h"
#include "codegen/Compile.h"
#include "codegen/cuda/CudaCodegen.h"
#include "runtime/cuda/CudaDevice.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace {

using namespace smelt;
using namespace smelt::rt::cuda;
constexpr int kSkip = 77, kBurst = 20, kSamples = 7;

/// The chain over `elements`, compiled for gpu:0: its one fused kernel and the CUDA module.
rt::Expected<rt::Executable> compileChain(int64_t elements, const std::string &arch) {
  mlir::MLIRContext context;
  codegen::loadDialects(context);
  auto module = mlir::parseSourceString<mlir::ModuleOp>(elementwiseChain(false, elements),
                                                        mlir::ParserConfig(&context));
  if (!module)
    return rt::Status::error("the chain does not parse");
  codegen::CompileOptions options;
  options.pipeline.devices = "cpu:0,gpu:0";
  options.cudaArch = arch;
  mlir::FailureOr<rt::Executable> exe = codegen::compile(*module, "chain", options);
  if (mlir::failed(exe))
    return rt::Status::error("the chain does not compile (diagnostics above)");
  if (exe->kernels.size() != 1)
    return rt::Status::error(fmt::format("the chain became {} kernels, not 1",
                                         exe->kernels.size()));
  return std::move(*exe);
}

/// Median GB/s (bytes read + written) of bursts of `queue`, each moving `bytes` per call.
rt::Expected<double> medianGBs(const CudaDevice &gpu, double bytes,
                               const std::function<rt::Status()> &queue) {
  std::vector<double> rates;
  for (int sample = -1; sample < kSamples; ++sample) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kBurst; ++i)
      if (rt::Status s = queue(); !s.ok())
        return s;
    if (rt::Status s = gpu.synchronize("the burst"); !s.ok())
      return s;
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (sample >= 0)
      rates.push_back(bytes * kBurst / seconds / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

int fail(const std::string &message) {
  fmt::print(stderr, "error: {}\n", message);
  return 1;
}

} // namespace

int main() {
  auto opened = CudaDevice::open(0);
  if (!opened) {
    fmt::print("skipped: needs a GPU: {}\n", opened.message());
    return kSkip;
  }
  const CudaDevice &gpu = **opened;
  const CudaDriver &cu = gpu.driver();
  fmt::print("device: {} ({})\n", gpu.name(), gpu.arch());
  for (int64_t elements : {int64_t(1) << 24, int64_t(1) << 26, int64_t(1) << 28}) {
    rt::Expected<rt::Executable> exe = compileChain(elements, gpu.arch());
    if (!exe)
      return fail(exe.message());
    const rt::FusedKernel &kernel = exe->kernels[0];
    const rt::CudaCode &code = *exe->cuda;
    CUmodule module = nullptr;
    bool cubin = !code.cubin.empty() && code.arch == gpu.arch();
    if (rt::Status s = gpu.check(cu.moduleLoadData(&module, cubin ? static_cast<const void *>(
                                                                        code.cubin.data())
                                                                  : code.ptx.c_str()),
                                 "cuModuleLoadData");
        !s.ok())
      return fail(s.message());
    CUfunction function = nullptr;
    if (rt::Status s = gpu.check(cu.moduleGetFunction(&function, module, kernel.name.c_str()),
                                 "cuModuleGetFunction");
        !s.ok())
      return fail(s.message());
    size_t bytes = size_t(elements) * 4;
    CUdeviceptr in = 0, out = 0;
    if (rt::Status s = gpu.check(cu.memAlloc(&in, bytes), "cuMemAlloc"); !s.ok())
      return fail(s.message());
    if (rt::Status s = gpu.check(cu.memAlloc(&out, bytes), "cuMemAlloc"); !s.ok())
      return fail(s.message());
    // Values that keep every op of the chain busy (not zeros): 0x3f80 3f80 is about 1.0039.
    if (rt::Status s = gpu.check(cu.memsetD8Async(in, 0x3f, bytes, gpu.stream()), "cuMemsetD8");
        !s.ok())
      return fail(s.message());
    void *params[] = {&in, &out};
    auto launch = [&] {
      return gpu.check(cu.launchKernel(function, unsigned(kernel.cudaGrid), 1, 1,
                                       unsigned(kernel.cudaBlock), 1, 1, 0, gpu.stream(), params,
                                       nullptr),
                       "cuLaunchKernel");
    };
    auto copy = [&] {
      return gpu.check(cu.memcpyDtoDAsync(out, in, bytes, gpu.stream()), "cuMemcpyDtoDAsync");
    };
    rt::Expected<double> fused = medianGBs(gpu, 2.0 * double(bytes), launch);
    rt::Expected<double> copied = medianGBs(gpu, 2.0 * double(bytes), copy);
    if (!fused || !copied)
      return fail(!fused ? fused.message() : copied.message());
    fmt::print("chain of 6 ops over {}M f32 ({} MiB), kernel {} ({} blocks of {}, {}): fused "
               "{:.0f} GB/s, device copy {:.0f} GB/s: {:.0f}% of the copy (target 85%)\n",
               elements >> 20, bytes >> 20, kernel.name, kernel.cudaGrid, kernel.cudaBlock,
               cubin ? "CUBIN" : "PTX", *fused, *copied, 100 * *fused / *copied);
    cu.memFree(in);
    cu.memFree(out);
    cu.moduleUnload(module);
  }
  return 0;
}
