// Emits fused kernels as MLIR functions (arith, math, scf and llvm pointer ops) for the CPU
// back end. A kernel is two functions: the entry with rt::CpuKernelFn's C ABI,
// `void name(void *const *args, int64_t begin, int64_t end)`, which loads the buffer pointers
// and calls `name_body(noalias pointers..., begin, end)`. The noalias parameters (results never
// alias inputs: each buffer is written by one step) let LLVM vectorize without runtime alias
// checks once the body is inlined into the entry.
#pragma once

#include "ir/SmeltDialect.h"
#include "runtime/DType.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace smelt::codegen::cpu {

/// Appends kernel `name` computing `fusion` to `module` (a module of the kernels' own
/// context) and returns the CPU target's error ("" when none). It only reads `fusion`, and
/// reports nothing in its context: kernels are emitted on several threads at once, and the
/// caller reports errors at the fusion afterwards.
std::string emitKernel(mlir::ModuleOp module, FusionOp fusion, llvm::StringRef name);

/// What a kernel body works with: its buffer pointers and its range of units [begin, end).
struct KernelBody {
  llvm::SmallVector<mlir::Value> inputs;
  llvm::SmallVector<rt::DType> inputDTypes;
  llvm::SmallVector<mlir::Value> results;
  mlir::Value begin, end;
};

/// A body's units taken as rows of `size`: the loop over the rows that [begin, end) touches,
/// with the builder's insertion point left at the start of its body (the caller keeps an
/// InsertionGuard), the row's first unit, and this range's part of the row, [lo, hi): the
/// range may start or stop inside a row.
struct RowLoop {
  mlir::Value row, rowStart, lo, hi;
};
RowLoop emitRowLoop(const KernelBody &body, int64_t size, mlir::ImplicitLocOpBuilder &b);

/// The loops of the two kinds of fusion, emitted at the builder's insertion point; they return
/// the CPU target's error ("" when none).
std::string emitLoopBody(FusionOp fusion, const KernelBody &body, mlir::ImplicitLocOpBuilder &b);
std::string emitReductionBody(FusionOp fusion, const KernelBody &body,
                              mlir::ImplicitLocOpBuilder &b);

} // namespace smelt::codegen::cpu
