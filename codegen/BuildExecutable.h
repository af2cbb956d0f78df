// Codegen's boundary: turns one function of a smelt module into the runtime's Executable.
#pragma once

#include "ir/SmeltDialect.h"
#include "runtime/Executable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

namespace smelt::codegen {

/// Builds the Executable of `function`: one buffer per SSA value, one step per op, constants
/// copied out as bytes. Emits a diagnostic at the first op it cannot lower and fails.
mlir::FailureOr<rt::Executable> buildExecutable(mlir::func::FuncOp function);

/// The kernel entry of `fusion` (kind, units, the ops it computes) under symbol `name`.
/// buildExecutable names a function's kernels "<function>_fusion<N>" in the order of its
/// fusion ops, which fusionsInOrder returns.
rt::FusedKernel describeKernel(FusionOp fusion, std::string name);
std::vector<FusionOp> fusionsInOrder(mlir::func::FuncOp function);

/// The name a function argument or result carries in `smelt.name` (set by the builder), or
/// "arg<N>" / "result<N>" when it has none.
std::string argumentName(mlir::func::FuncOp function, unsigned index);
std::string resultName(mlir::func::FuncOp function, unsigned index);

} // namespace smelt::codegen
