// Renders and compiles fusions for CUDA; NVRTC's message becomes a diagnostic at the fusion.
#include "codegen/cuda/CudaCodegen.h"

#include "codegen/BuildExecutable.h"
#include "codegen/cuda/CudaRenderer.h"
#include "codegen/cuda/Nvrtc.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace smelt::codegen {

FailureOr<rt::CudaCode> compileCudaKernels(ArrayRef<FusionOp> fusions,
                                           std::vector<rt::FusedKernel> &kernels,
                                           const std::string &arch, bool fmad) {
  if (fusions.empty())
    return rt::CudaCode{arch, "", "", {}};
  rt::Expected<rt::CudaCode> code = compileWithNvrtc(renderCudaModule(fusions, kernels), arch, fmad);
  if (!code) {
    FusionOp first = fusions.front();
    return first.emitError() << "CUDA kernels failed to compile: " << code.message();
  }
  return std::move(*code);
}

FailureOr<CudaFunctionCode> compileCudaFunction(func::FuncOp function, const std::string &arch,
                                                bool fmad) {
  CudaFunctionCode result;
  std::vector<FusionOp> fusions = fusionsInOrder(function);
  for (auto [i, fusion] : llvm::enumerate(fusions))
    result.kernels.push_back(
        describeKernel(fusion, function.getSymName().str() + "_fusion" + std::to_string(i)));
  FailureOr<rt::CudaCode> code = compileCudaKernels(fusions, result.kernels, arch, fmad);
  if (failed(code))
    return failure();
  result.code = std::move(*code);
  return result;
}

} // namespace smelt::codegen
