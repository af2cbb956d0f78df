// The default pipeline, as a numbered script: each step and why it is there.
#include "passes/Passes.h"

#include "mlir/Transforms/Passes.h"

namespace smelt {

void buildDefaultPipeline(mlir::OpPassManager &pm) {
  // 1. Fold identity converts/reshapes/broadcasts and constants the builder left behind.
  pm.addPass(mlir::createCanonicalizerPass());
  // 2. Merge identical subgraphs (the same broadcast of a bias built twice, say).
  pm.addPass(mlir::createCSEPass());
}

} // namespace smelt
