// The host CPU's TargetMachine (see HostMachine.h), the native target initialized once.
#include "codegen/cpu/HostMachine.h"

#include "mlir/ExecutionEngine/OptUtils.h"

#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>

namespace smelt::codegen::cpu {

std::unique_ptr<llvm::TargetMachine>
hostTargetMachine(std::string &error, std::optional<llvm::Reloc::Model> relocation) {
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  // detectHost() names the host CPU and all its features, so the loop vectorizer uses the
  // widest vectors the CPU has.
  auto builder = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!builder) {
    error = "cannot describe the host CPU: " + llvm::toString(builder.takeError());
    return nullptr;
  }
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  if (relocation)
    builder->setRelocationModel(relocation);
  auto machine = builder->createTargetMachine();
  if (!machine) {
    error = "no code generator for the host CPU: " + llvm::toString(machine.takeError());
    return nullptr;
  }
  return std::move(*machine);
}

std::string optimizeForHost(llvm::Module &module, llvm::TargetMachine &machine,
                            std::string *printed) {
  auto optimize = mlir::makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, &machine);
  std::string error;
  if (llvm::Error e = optimize(&module))
    error = llvm::toString(std::move(e));
  if (printed) {
    llvm::raw_string_ostream os(*printed);
    module.print(os, nullptr);
  }
  return error;
}

} // namespace smelt::codegen::cpu
