// smelt-opt: MLIR's opt driver with the smelt dialect and Smelt's passes; what lit tests run.
#include "ir/SmeltDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/WithColor.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<smelt::SmeltDialect, mlir::func::FuncDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  smelt::registerSmeltPasses();
  auto [input, output] =
      mlir::registerAndParseCLIOptions(argc, argv, "Smelt optimizer driver\n", registry);
  // A FIFO or a device such as /dev/zero would be read forever or until memory runs out;
  // "-" is standard input.
  llvm::sys::fs::file_status status;
  if (input != "-" && !llvm::sys::fs::status(input, status) &&
      !llvm::sys::fs::is_regular_file(status)) {
    llvm::WithColor::error(llvm::errs(), "smelt-opt") << input << ": not a regular file\n";
    return 1;
  }
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, input, output, registry));
}
