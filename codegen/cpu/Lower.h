// The kernels' MLIR pipeline down to the LLVM dialect (codegen/cpu/Lower.cpp).
#pragma once

#include "mlir/IR/BuiltinOps.h"

namespace smelt::codegen::cpu {

/// Rewrites f32 exp/log/tanh/erf as polynomials, the math ops LLVM has no instruction for as
/// libm calls, then converts scf, arith, math, func and cf to the LLVM dialect.
mlir::LogicalResult lowerToLLVMDialect(mlir::ModuleOp module);

} // namespace smelt::codegen::cpu
