// Renders and compiles fusions for CUDA; NVRTC's message becomes a diagnostic at the fusion.
#include "codegen/cuda/CudaCodegen.h"

#include "codegen/BuildExecutable.h"
#include "codegen/cuda/CudaRenderer.h"
#include "codegen/cuda/Nvrtc.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace smelt::codegen {

FailureOr<rt::CudaCode> compileCudaKernels(ArrayRef<Operation *> ops,
                                           std::vector<rt::FusedKernel> &kernels,
                                           const std::string &arch, bool fmad) {
  if (ops.empty())
    return rt::CudaCode{arch, "", "", {}};
  rt::Expected<rt::CudaCode> code = compileWithNvrtc(renderCudaModule(ops, kernels), arch, fmad);
  if (!code)
    return ops.front()->emitError() << "CUDA kernels failed to compile: " << code.message();
  return std::move(*code);
}

FailureOr<CudaFunctionCode> compileCudaFunction(func::FuncOp function, const std::string &arch,
                                                bool fmad) {
  CudaFunctionCode result;
  std::vector<Operation *> ops = kernelOpsInOrder(function);
  for (auto [i, op] : llvm::enumerate(ops))
    result.kernels.push_back(describeKernel(op, kernelName(function, op, i)));
  FailureOr<rt::CudaCode> code = compileCudaKernels(ops, result.kernels, arch, fmad);
  if (failed(code))
    return failure();
  result.code = std::move(*code);
  return result;
}

} // namespace smelt::codegen
