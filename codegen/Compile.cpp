// Compile entry points: parse, pick the entry function, run the pipeline, build the Executable.
#include "codegen/Compile.h"

#include "codegen/BuildExecutable.h"
#include "ir/SmeltDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

namespace smelt::codegen {

void loadDialects(MLIRContext &context) {
  context.loadDialect<SmeltDialect, func::FuncDialect>();
}

OwningOpRef<ModuleOp> parseModuleFile(MLIRContext &context, llvm::StringRef path) {
  loadDialects(context);
  return parseSourceFile<ModuleOp>(path, &context);
}

func::FuncOp findEntry(ModuleOp module, llvm::StringRef entry) {
  auto functions = llvm::to_vector(module.getOps<func::FuncOp>());
  if (!entry.empty()) {
    if (auto f = module.lookupSymbol<func::FuncOp>(entry))
      return f;
  } else if (functions.size() == 1) {
    return functions.front();
  } else if (auto f = module.lookupSymbol<func::FuncOp>("main")) {
    return f;
  }
  std::string names;
  for (func::FuncOp f : functions)
    names += (names.empty() ? "@" : ", @") + f.getSymName().str();
  module.emitError() << "no function "
                     << (entry.empty() ? "@main (and not exactly one function)"
                                       : "@" + entry.str())
                     << " to compile; the module has " << (names.empty() ? "none" : names);
  return nullptr;
}

FailureOr<rt::Executable> compile(ModuleOp module, llvm::StringRef entry) {
  if (failed(verify(module)))
    return failure();
  PassManager pm(module->getContext());
  buildDefaultPipeline(pm);
  if (failed(pm.run(module)))
    return failure();
  func::FuncOp function = findEntry(module, entry);
  if (!function)
    return failure();
  return buildExecutable(function);
}

} // namespace smelt::codegen
