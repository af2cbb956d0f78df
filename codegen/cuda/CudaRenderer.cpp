// Assembles a module's CUDA source: the prelude, then each fusion through the emitter of its
// kind and each op with a kernel of its own through its emitter; also the pieces the emitters
// share (index type, kernel signature).
#include "codegen/cuda/CudaRenderer.h"

#include "codegen/BuildExecutable.h"
#include "codegen/EquivalentFusions.h"
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

/// The kernel's parameters: (const T *__restrict__ in0, ..., T *__restrict__ out0, ...), or
/// their names alone for a call. A result written in place of an input (`inPlace`, per result:
/// the input, or -1; smelt-donate-in-place) and that input share memory: neither is restrict.
static std::string parameters(ValueRange inputs, ValueRange results, bool typed,
                              ArrayRef<int64_t> inPlace = {}) {
  auto restrict = [&](bool shared) { return shared ? " *" : " *__restrict__ "; };
  std::string text, separator;
  for (auto [i, input] : llvm::enumerate(inputs)) {
    bool shared = llvm::is_contained(inPlace, int64_t(i));
    text += separator +
            (typed ? "const " + std::string(storageType(elementDType(input))) + restrict(shared)
                   : std::string()) +
            "in" + std::to_string(i);
    separator = ", ";
  }
  for (auto [i, result] : llvm::enumerate(results)) {
    bool shared = i < inPlace.size() && inPlace[i] >= 0;
    text += separator +
            (typed ? std::string(storageType(elementDType(result))) + restrict(shared)
                   : std::string()) +
            "out" + std::to_string(i);
    separator = ", ";
  }
  return text;
}

ArrayRef<int64_t> inPlaceResults(FusionOp fusion) {
  auto attr = fusion->getAttrOfType<DenseI64ArrayAttr>("smelt.in_place");
  return attr ? attr.asArrayRef() : ArrayRef<int64_t>();
}

std::string kernelHeader(FusionOp fusion, llvm::StringRef name, int64_t block, KernelForm form) {
  std::string shape;
  for (int64_t size : fusion.getIterationShape())
    shape += (shape.empty() ? "" : "x") + std::to_string(size);
  std::string text = "// " + name.str() + ": " + stringifyFusionKind(fusion.getKind()).str() +
                     " over " + (shape.empty() ? "a scalar" : shape) + ": " +
                     describeKernel(fusion, name.str()).ops +
                     (form == KernelForm::SharedBody ? " (the body equivalent fusions share)" : "") +
                     "\n";
  text += form == KernelForm::SharedBody
              ? "SMELT_SHARED_BODY void " + name.str() + "("
              : "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(block) + ") " +
                    name.str() + "(";
  return text +
         parameters(fusion.getInputs(), fusion.getResults(), /*typed=*/true,
                    inPlaceResults(fusion)) +
         ") {\n";
}

std::string oneOpKernelHeader(Operation *op, llvm::StringRef name, int64_t block,
                              llvm::StringRef how) {
  std::string operands;
  for (Value operand : op->getOperands()) {
    operands += operands.empty() ? "" : ", ";
    for (int64_t size : cast<RankedTensorType>(operand.getType()).getShape())
      operands += std::to_string(size) + "x";
    operands += rt::dtypeName(elementDType(operand));
  }
  return "// " + name.str() + ": " + how.str() + " (" + operands + ")\n" +
         "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(block) + ") " +
         name.str() + "(" + parameters(op->getOperands(), op->getResults(), /*typed=*/true) +
         ") {\n";
}

std::string entryCallingBody(FusionOp fusion, llvm::StringRef name, int64_t block,
                             llvm::StringRef body) {
  return kernelHeader(fusion, name, block) + "  " + body.str() + "(" +
         parameters(fusion.getInputs(), fusion.getResults(), /*typed=*/false) + ");\n}\n";
}

} // namespace cuda

/// The kernel of an op that no fusion holds.
static cuda::KernelSource renderOwnKernel(Operation *op, llvm::StringRef name) {
  if (auto argmax = dyn_cast<ArgmaxOp>(op))
    return cuda::renderArgmaxKernel(argmax, name);
  return cuda::renderScatterAddKernel(cast<ScatterAddOp>(op), name);
}

std::string renderCudaModule(ArrayRef<Operation *> ops, MutableArrayRef<rt::FusedKernel> kernels) {
  assert(ops.size() == kernels.size() && "one kernel entry per op");
  // Equivalent fusions' kernels are one body, rendered with the first of them, that each of
  // their entries calls: NVRTC optimizes and ptxas compiles it once (a transformer's layers
  // repeat their kernels). first[i] is the op of that first fusion, for fusion i.
  std::vector<FusionOp> fusions;
  std::vector<size_t> opOf, first(ops.size());
  for (auto [i, op] : llvm::enumerate(ops))
    if (auto fusion = dyn_cast<FusionOp>(op)) {
      fusions.push_back(fusion);
      opOf.push_back(i);
    }
  for (auto [f, firstFusion] : llvm::enumerate(firstEquivalentFusions(fusions)))
    first[opOf[f]] = opOf[firstFusion];
  std::vector<size_t> members(ops.size(), 0);
  for (size_t i : opOf)
    ++members[first[i]];
  std::vector<cuda::KernelSource> shared(ops.size());
  std::string source = cuda::cudaPrelude().str();
  for (auto [i, kernel] : llvm::enumerate(kernels)) {
    auto fusion = dyn_cast<FusionOp>(ops[i]);
    auto render = [&](const std::string &name, cuda::KernelForm form) {
      return fusion.getKind() == FusionKind::loop
                 ? cuda::renderLoopKernel(fusion, name, form)
                 : cuda::renderReductionKernel(fusion, name, form);
    };
    cuda::KernelSource rendered;
    if (!fusion) {
      rendered = renderOwnKernel(ops[i], kernel.name);
    } else if (members[first[i]] == 1) {
      rendered = render(kernel.name, cuda::KernelForm::Entry);
    } else {
      std::string body = kernels[first[i]].name + "_body";
      if (first[i] == i) {
        shared[i] = render(body, cuda::KernelForm::SharedBody);
        source += "\n" + shared[i].text;
      }
      const cuda::KernelSource &bodySource = shared[first[i]];
      rendered = {cuda::entryCallingBody(fusion, kernel.name, bodySource.block, body),
                  bodySource.block, bodySource.grid};
    }
    kernel.cudaBlock = rendered.block;
    kernel.cudaGrid = rendered.grid;
    source += "\n" + rendered.text;
  }
  return source;
}

} // namespace smelt::codegen
