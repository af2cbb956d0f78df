// smelt-opt: MLIR's opt driver with the smelt dialect and Smelt's passes; what lit tests run.
#include "ir/SmeltDialect.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<smelt::SmeltDialect, mlir::func::FuncDialect>();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  smelt::registerSmeltPasses();
  return mlir::asMainReturnCode(mlir::MlirOptMain(argc, argv, "Smelt optimizer driver\n", registry));
}
