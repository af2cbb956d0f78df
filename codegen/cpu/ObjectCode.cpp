// Kernel module -> object file through LLVM's TargetMachine, with position-independent code so
// that the same object can be JIT-linked or linked into a shared library. Its own translation
// unit: LLVM's code generator headers are slow.
#include "codegen/cpu/HostMachine.h"
#include "codegen/cpu/ObjectCode.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/GlobalAlias.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;

namespace smelt::codegen::cpu {

std::optional<std::vector<char>> emitObjectFile(ModuleOp module, ArrayRef<KernelAlias> aliases,
                                                std::string &error, std::string *llvmIR,
                                                rt::Trace *trace, const rt::Trace::Track &track) {
  registerBuiltinDialectTranslation(*module.getContext());
  registerLLVMDialectTranslation(*module.getContext());
  std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine(error);
  if (!machine)
    return std::nullopt;
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(module, context, "kernels");
  if (!llvmModule) {
    error = "translation to LLVM IR failed";
    return std::nullopt;
  }
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  for (const KernelAlias &alias : aliases) {
    llvm::Function *kernel = llvmModule->getFunction(alias.kernel);
    if (!kernel) {
      error = "kernel '" + alias.kernel + "' (which '" + alias.name +
              "' is another name of) is not in its module";
      return std::nullopt;
    }
    llvm::GlobalAlias::create(alias.name, kernel);
  }
  {
    rt::Trace::Scope span(trace, track, "LLVM optimization", "compile");
    if (std::string e = optimizeForHost(*llvmModule, *machine, llvmIR); !e.empty()) {
      error = "optimizing the kernels failed: " + e;
      return std::nullopt;
    }
  }

  rt::Trace::Scope span(trace, track, "machine code", "compile");
  llvm::SmallVector<char, 0> buffer;
  llvm::raw_svector_ostream os(buffer);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr, llvm::CodeGenFileType::ObjectFile)) {
    error = "the host's code generator cannot emit object files";
    return std::nullopt;
  }
  codegen.run(*llvmModule);
  return std::vector<char>(buffer.begin(), buffer.end());
}

} // namespace smelt::codegen::cpu
