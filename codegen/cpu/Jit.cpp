// Kernel module -> machine code in process, through mlir::ExecutionEngine (ORC LLJIT). The
// engine owns the code; rt::CpuCode keeps it alive and the runtime calls through plain function
// pointers.
#include "codegen/cpu/Jit.h"

#include "codegen/cpu/HostMachine.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"

#include "llvm/IR/Module.h"
#include "llvm/Target/TargetMachine.h"

using namespace mlir;

namespace smelt::codegen::cpu {

std::shared_ptr<rt::CpuCode> jitCompile(ModuleOp module, ArrayRef<std::string> names,
                                        std::string &error) {
  registerBuiltinDialectTranslation(*module.getContext());
  registerLLVMDialectTranslation(*module.getContext());
  std::unique_ptr<llvm::TargetMachine> machine = hostTargetMachine(error);
  if (!machine)
    return nullptr;
  llvm::TargetMachine *target = machine.get();

  auto code = std::make_shared<rt::CpuCode>();
  // The engine calls the transformer inside create() and aborts on an error it returns, so
  // an optimizer error is kept here and reported after.
  std::string optimizeError;
  auto transformer = [&](llvm::Module *llvmModule) -> llvm::Error {
    // The engine wraps every function as `_mlir_<name>(void **)` for invokePacked, which the
    // runtime never calls: dropped, they cost no optimization or machine code.
    for (llvm::Function &function : llvm::make_early_inc_range(*llvmModule))
      if (function.getName().starts_with("_mlir_") && function.use_empty())
        function.eraseFromParent();
    optimizeError = optimizeForHost(*llvmModule, *target, &code->llvmIR);
    return llvm::Error::success();
  };
  ExecutionEngineOptions options;
  options.transformer = transformer;
  options.jitCodeGenOptLevel = llvm::CodeGenOptLevel::Aggressive;
  options.enableGDBNotificationListener = false;
  options.enablePerfNotificationListener = false;
  auto engine = ExecutionEngine::create(module, options, std::move(machine));
  if (!engine) {
    error = "JIT compilation failed: " + llvm::toString(engine.takeError());
    return nullptr;
  }
  if (!optimizeError.empty()) {
    error = "optimizing the kernels failed: " + optimizeError;
    return nullptr;
  }
  for (const std::string &name : names) {
    auto address = (*engine)->lookup(name);
    if (!address) {
      error = "kernel '" + name +
              "' is missing from the JIT-compiled code: " + llvm::toString(address.takeError());
      return nullptr;
    }
    code->entries.push_back(reinterpret_cast<rt::CpuKernelFn>(*address));
  }
  code->owner = std::shared_ptr<ExecutionEngine>(std::move(*engine));
  return code;
}

} // namespace smelt::codegen::cpu
