// compileArtifact: compile() asked for object code, and the artifact's extras filled from it.
#include "codegen/CompileArtifact.h"

#include "codegen/BuildExecutable.h"

namespace smelt::codegen {

mlir::FailureOr<CompiledArtifact> compileArtifact(mlir::ModuleOp module, llvm::StringRef entry,
                                                  CompileOptions options,
                                                  const std::string &target) {
  CompiledArtifact result;
  options.cpuObject = &result.extras.cpuObject;
  if (llvm::StringRef(target).starts_with("cuda:")) {
    options.cudaArch = target.substr(5);
    options.hostFallback = true;
  }
  mlir::FailureOr<rt::Executable> exe = compile(module, entry, options);
  if (mlir::failed(exe))
    return mlir::failure();
  result.executable = std::move(*exe);
  // The reader wants one symbol per kernel, or no CPU section at all; a kernel only a GPU
  // runs has none ("").
  if (!result.extras.cpuObject.empty())
    for (auto [i, kernel] : llvm::enumerate(result.executable.kernels))
      result.extras.cpuSymbols.push_back(result.executable.cpu->entries[i] ? kernel.name : "");
  result.extras.target = target;
  result.extras.producer = kProducer;
  return result;
}

} // namespace smelt::codegen
