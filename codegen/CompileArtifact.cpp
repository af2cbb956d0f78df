// compileArtifact: compile() asked for object code, and the artifact's extras filled from it.
#include "codegen/CompileArtifact.h"

#include "codegen/BuildExecutable.h"

namespace smelt::codegen {

/// The format keeps no result names, so the buffer of each result takes its name (smelt.name,
/// or result<N>), which `smelt run` gives its output files. A buffer that is also an input, or
/// returned twice, keeps its own.
static void nameOutputs(mlir::ModuleOp module, rt::Executable &exe) {
  mlir::func::FuncOp function = module.lookupSymbol<mlir::func::FuncOp>(exe.name);
  if (!function || function.getNumResults() != exe.outputs.size())
    return;
  for (auto [i, id] : llvm::enumerate(exe.outputs))
    if (llvm::count(exe.outputs, id) == 1 && !llvm::is_contained(exe.inputs, id))
      exe.buffers[id].name = resultName(function, i);
}

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
  nameOutputs(module, result.executable);
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
