// Smelt's pass pipeline. Passes of their own arrive with later work (autodiff, fuse, ...), each
// declared in Passes.td; the default pipeline is the numbered script in Passes.cpp.
#pragma once

#include "mlir/Pass/PassManager.h"

namespace smelt {

/// Appends the default compile pipeline, run on a module before codegen.
void buildDefaultPipeline(mlir::OpPassManager &pm);

} // namespace smelt
