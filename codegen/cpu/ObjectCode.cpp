// Kernel module -> object file through LLVM's TargetMachine: the JIT's pipeline (same target
// machine, same optimization), with position-independent code so that the object can be linked
// into a shared library. Its own translation unit: LLVM's code generator headers are slow.
#include "codegen/cpu/HostMachine.h"
#include "codegen/cpu/ObjectCode.h"

#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;

namespace smelt::codegen::cpu {

std::optional<std::vector<char>> emitObjectFile(ModuleOp module, std::string &error,
                                                std::string *llvmIR) {
  registerBuiltinDialectTranslation(*module.getContext());
  registerLLVMDialectTranslation(*module.getContext());
  std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine(error, llvm::Reloc::PIC_);
  if (!machine)
    return std::nullopt;
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(module, context, "kernels");
  if (!llvmModule) {
    error = "translation to LLVM IR failed";
    return std::nullopt;
  }
  // What the JIT's engine sets before its transformer runs, so the optimizer sees the same
  // module in both.
  llvmModule->setDataLayout(machine->createDataLayout());
  llvmModule->setTargetTriple(machine->getTargetTriple());
  if (std::string e = optimizeForHost(*llvmModule, *machine, llvmIR); !e.empty()) {
    error = "optimizing the kernels failed: " + e;
    return std::nullopt;
  }

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
