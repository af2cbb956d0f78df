// The host CPU's TargetMachine (see HostMachine.h), the native target initialized once.
#include "codegen/cpu/HostMachine.h"

#include "mlir/ExecutionEngine/OptUtils.h"

#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/MDBuilder.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>

namespace smelt::codegen::cpu {

std::optional<llvm::orc::JITTargetMachineBuilder> hostMachineBuilder(std::string &error) {
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
    return std::nullopt;
  }
  builder->setCodeGenOptLevel(llvm::CodeGenOptLevel::Aggressive);
  // Position-independent: the same object is JIT-linked or linked into a shared library.
  builder->setRelocationModel(llvm::Reloc::PIC_);
  return std::move(*builder);
}

std::unique_ptr<llvm::TargetMachine> hostTargetMachine(std::string &error) {
  std::optional<llvm::orc::JITTargetMachineBuilder> builder = hostMachineBuilder(error);
  if (!builder)
    return nullptr;
  auto machine = builder->createTargetMachine();
  if (!machine) {
    error = "no code generator for the host CPU: " + llvm::toString(machine.takeError());
    return nullptr;
  }
  return std::move(*machine);
}

/// Marks every scalar select unpredictable, so that CodeGenPrepare keeps it a select. Without
/// the mark it turns a select whose operand is costly (the division in the tanh approximation)
/// into a branch, splitting the block in two: each split moves the rest of the block, and a
/// long fused chain's one block is split once per select, which made compile time quadratic
/// (a chain of 2,000 ops: 0.8 s of 1.3 s of code generation). Element values are data: such
/// a branch would be unpredictable anyway, and the vector loop has selects only.
static void keepSelects(llvm::Module &module) {
  llvm::MDNode *unpredictable = llvm::MDBuilder(module.getContext()).createUnpredictable();
  for (llvm::Function &function : module)
    for (llvm::Instruction &instruction : llvm::instructions(function))
      if (auto *select = llvm::dyn_cast<llvm::SelectInst>(&instruction))
        select->setMetadata(llvm::LLVMContext::MD_unpredictable, unpredictable);
}

std::string optimizeForHost(llvm::Module &module, llvm::TargetMachine &machine,
                            std::string *printed) {
  auto optimize = mlir::makeOptimizingTransformer(/*optLevel=*/3, /*sizeLevel=*/0, &machine);
  std::string error;
  if (llvm::Error e = optimize(&module))
    error = llvm::toString(std::move(e));
  keepSelects(module);
  if (printed) {
    llvm::raw_string_ostream os(*printed);
    module.print(os, nullptr);
  }
  return error;
}

} // namespace smelt::codegen::cpu
