// Codegen's boundary: turns one function of a smelt module into the runtime's Executable.
#pragma once

#include "ir/SmeltDialect.h"
#include "runtime/Executable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

namespace smelt::codegen {

/// Builds the Executable of `function`: one buffer per SSA value, one step per op, constants
/// copied out as bytes, and its schedule (planSchedule). Emits a diagnostic at the first op it
/// cannot lower and fails.
mlir::FailureOr<rt::Executable> buildExecutable(mlir::func::FuncOp function);

/// Whether `op` is an argmax or scatter_add placed on a GPU: no fusion holds them, so each gets
/// a CUDA kernel of its own, which its step runs there (rt::ArgmaxParams::kernel). The CPU
/// runs them with its own routines (runtime/cpu), wherever placed.
bool hasOwnGpuKernel(mlir::Operation *op);

/// The kernel entry of `op` (kind, units, the ops it computes) under symbol `name`: a fusion,
/// or an op with a kernel of its own.
rt::FusedKernel describeKernel(mlir::Operation *op, std::string name);
std::vector<FusionOp> fusionsInOrder(mlir::func::FuncOp function);
/// The ops that become Executable::kernels, in its order: the fusions, then the ops with a
/// kernel of their own. buildExecutable names kernel N "<function>_fusion<N>" for a fusion,
/// else "<function>_<op><N>" ("main_argmax7"): kernelName.
std::vector<mlir::Operation *> kernelOpsInOrder(mlir::func::FuncOp function);
std::string kernelName(mlir::func::FuncOp function, mlir::Operation *op, size_t index);

/// The name a function argument or result carries in `smelt.name` (set by the builder), or
/// "arg<N>" / "result<N>" when it has none.
std::string argumentName(mlir::func::FuncOp function, unsigned index);
std::string resultName(mlir::func::FuncOp function, unsigned index);

} // namespace smelt::codegen
