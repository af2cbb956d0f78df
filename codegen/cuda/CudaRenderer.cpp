// Assembles a module's CUDA source: the prelude, then each fusion through the emitter of its
// kind; also the pieces the emitters share (index type, kernel signature).
#include "codegen/cuda/CudaRenderer.h"

#include "codegen/BuildExecutable.h"
#include "codegen/cuda/CudaKernels.h"
#include "codegen/cuda/CudaTarget.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;

namespace smelt::codegen {

namespace cuda {

int64_t elementCount(ArrayRef<int64_t> shape) {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

static int64_t elementCount(Value value) {
  return elementCount(cast<RankedTensorType>(value.getType()).getShape());
}

std::string indexTypeFor(FusionOp fusion) {
  int64_t largest = elementCount(fusion.getIterationShape());
  for (Value value : llvm::concat<const Value>(fusion.getInputs(), fusion.getResults()))
    largest = std::max(largest, elementCount(value));
  return largest < (int64_t(1) << 30) ? "int32_t" : "int64_t";
}

std::string kernelHeader(FusionOp fusion, llvm::StringRef name, int64_t block) {
  std::string shape;
  for (int64_t size : fusion.getIterationShape())
    shape += (shape.empty() ? "" : "x") + std::to_string(size);
  std::string text = "// " + name.str() + ": " + stringifyFusionKind(fusion.getKind()).str() +
                     " over " + (shape.empty() ? "a scalar" : shape) + ": " +
                     describeKernel(fusion, name.str()).ops + "\n";
  text += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(block) + ") " +
          name.str() + "(";
  std::string separator;
  for (auto [i, input] : llvm::enumerate(fusion.getInputs())) {
    text += separator + "const " + storageType(elementDType(input)) + " *__restrict__ in" +
            std::to_string(i);
    separator = ", ";
  }
  for (auto [i, result] : llvm::enumerate(fusion.getResults())) {
    text +=
        separator + storageType(elementDType(result)) + " *__restrict__ out" + std::to_string(i);
    separator = ", ";
  }
  return text + ") {\n";
}

} // namespace cuda

std::string renderCudaModule(ArrayRef<FusionOp> fusions, MutableArrayRef<rt::FusedKernel> kernels) {
  assert(fusions.size() == kernels.size() && "one kernel entry per fusion");
  std::string source = cuda::cudaPrelude().str();
  for (auto [i, kernel] : llvm::enumerate(kernels)) {
    FusionOp fusion = fusions[i];
    cuda::KernelSource rendered = fusion.getKind() == FusionKind::loop
                                      ? cuda::renderLoopKernel(fusion, kernel.name)
                                      : cuda::renderReductionKernel(fusion, kernel.name);
    kernel.cudaBlock = rendered.block;
    kernel.cudaGrid = rendered.grid;
    source += "\n" + rendered.text;
  }
  return source;
}

} // namespace smelt::codegen
