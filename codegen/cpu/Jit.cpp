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

#include <atomic>
#include <cstdlib>
#include <mutex>

using namespace mlir;

namespace smelt::codegen::cpu {

namespace {

/// Set while the process exits, from before any engine kept in a static made earlier than the
/// first JIT compile (a benchmark's cached executor) is destroyed.
std::atomic<bool> exiting{false};

/// An engine's destructor runs the JIT's deinitializers, which ORC compiles then. During exit
/// that can come after LLVM's lazily built statics (codegen's type tables, made by our first
/// compile and so destroyed before statics made earlier) are gone: a corrupt selection DAG,
/// "Cannot select", a crash at exit. An engine destroyed while the process exits is left to
/// the exit instead; its kernels have no destructors to run.
void destroyUnlessExiting(ExecutionEngine *engine) {
  if (!exiting.load())
    delete engine;
}

/// Registers the exit flag's setter once, before the first engine is made: handlers run in
/// the reverse order of registration, so it runs before the destructors of statics made
/// earlier.
void watchForExit() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit([] { exiting.store(true); }); });
}

} // namespace

std::shared_ptr<rt::CpuCode> jitCompile(ModuleOp module, ArrayRef<std::string> names,
                                        std::string &error) {
  watchForExit();
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
  code->owner = std::shared_ptr<ExecutionEngine>(engine->release(), destroyUnlessExiting);
  return code;
}

} // namespace smelt::codegen::cpu
