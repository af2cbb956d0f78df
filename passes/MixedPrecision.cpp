// smelt-mixed-precision: applies a Keras-style precision policy (ir/MixedPrecision.h) to the
// functions of a module. Run it on the forward (loss) function before smelt-autodiff, as the
// builder does, so the gradient flows back through the casts to f32 master weights.
#include "passes/Passes.h"

#include "ir/MixedPrecision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#define DEBUG_TYPE "smelt-mixed-precision"

namespace smelt {

#define GEN_PASS_DEF_MIXEDPRECISION
#include "passes/Passes.h.inc"

namespace {

struct MixedPrecisionPass : impl::MixedPrecisionBase<MixedPrecisionPass> {
  using MixedPrecisionBase::MixedPrecisionBase;

  void runOnOperation() override {
    std::optional<PrecisionPolicy> parsed = parsePrecisionPolicy(policy);
    if (!parsed) {
      getOperation().emitError() << "smelt-mixed-precision: policy '" << policy
                                 << "' must be f32, mixed_bf16 or mixed_f16";
      return signalPassFailure();
    }
    bool found = false;
    for (auto function : getOperation().getOps<mlir::func::FuncOp>()) {
      if (function.isExternal() || (!functionName.empty() && function.getSymName() != functionName))
        continue;
      found = true;
      MixedPrecisionStats stats = applyMixedPrecision(function.getBody().front(), *parsed);
      numLowPrecisionOps += stats.lowPrecisionOps;
      numCasts += stats.casts;
    }
    if (!found && !functionName.empty()) {
      getOperation().emitError() << "smelt-mixed-precision: no function @" << functionName
                                 << " with a body";
      return signalPassFailure();
    }
  }
};

} // namespace

} // namespace smelt
