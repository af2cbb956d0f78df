// Lowers the kernel module to the LLVM dialect. Math functions decide whether a loop
// vectorizes: a libm call per element does not, so f32 exp, log, tanh and erf (which f16 and
// bf16 compute in too) become MLIR's polynomial approximations, within a few ulp of libm,
// well inside the f32 test tolerance (tests/unit/cpu check each against the unfused kernel).
// f64 keeps libm's functions. What LLVM has no intrinsic for (erf, tanh on f64) becomes an
// explicit libm call, which the JIT resolves in the process.
#include "codegen/cpu/Lower.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace smelt::codegen::cpu {

namespace {

/// Polynomial approximations (f32 only; f64 ops are left alone by the patterns).
LogicalResult approximateMath(ModuleOp module) {
  static const StringRef approximated[] = {"exp", "log", "tanh", "erf"};
  RewritePatternSet patterns(module.getContext());
  populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
    return name.consume_front("math.") && llvm::is_contained(approximated, name);
  });
  return applyPatternsGreedily(module, std::move(patterns));
}

/// Math ops with no LLVM intrinsic become libm calls; only those, so that sqrt, exp and the
/// rest stay intrinsics LLVM understands.
LogicalResult callLibm(ModuleOp module) {
  SmallVector<Operation *> ops;
  module.walk([&](Operation *op) {
    if (isa<math::ErfOp, math::TanhOp>(op))
      ops.push_back(op);
  });
  if (ops.empty())
    return success();
  RewritePatternSet patterns(module.getContext());
  populateMathToLibmConversionPatterns(patterns);
  GreedyRewriteConfig config;
  config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
  return applyOpPatternsGreedily(ops, std::move(patterns), config);
}

} // namespace

LogicalResult lowerToLLVMDialect(ModuleOp module) {
  if (failed(approximateMath(module)) || failed(callLibm(module)))
    return module.emitError("CPU kernels: rewriting math functions did not converge");
  PassManager pm(module.getContext());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  return pm.run(module);
}

} // namespace smelt::codegen::cpu
