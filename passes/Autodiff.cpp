// smelt-autodiff: clones the loss function as @<func>_grad and appends the reverse pass that
// ir/Autodiff.h builds, returning the loss and the chosen arguments' gradients.
#include "passes/Passes.h"

#include "ir/Autodiff.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "smelt-autodiff"

namespace smelt {

#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"

namespace {

struct AutodiffPass : impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    mlir::ModuleOp module = getOperation();
    auto loss = module.lookupSymbol<mlir::func::FuncOp>(function);
    if (!loss || loss.isExternal()) {
      module.emitError() << "smelt-autodiff: no function @" << function << " with a body";
      return signalPassFailure();
    }
    if (loss.getNumResults() < 1) {
      loss.emitOpError("returns nothing; smelt-autodiff needs its first result to be the loss");
      return signalPassFailure();
    }
    bool anyParams = false;
    for (unsigned i = 0; i < loss.getNumArguments(); ++i)
      anyParams |= bool(loss.getArgAttr(i, "smelt.param"));
    std::string mode = wrt.empty() ? std::string(anyParams ? "params" : "all") : std::string(wrt);
    if (mode != "params" && mode != "all") {
      loss.emitOpError("smelt-autodiff: wrt='") << mode << "' must be 'params' or 'all'";
      return signalPassFailure();
    }

    mlir::OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(loss);
    auto grad = mlir::cast<mlir::func::FuncOp>(builder.clone(*loss));
    grad.setSymName(function + "_grad");
    auto ret = mlir::cast<mlir::func::ReturnOp>(grad.getBody().front().getTerminator());
    llvm::SmallVector<mlir::Value> chosen;
    llvm::SmallVector<unsigned> chosenIndex;
    for (mlir::BlockArgument arg : grad.getArguments()) {
      bool isParam = bool(grad.getArgAttr(arg.getArgNumber(), "smelt.param"));
      auto type = mlir::cast<mlir::RankedTensorType>(arg.getType());
      if ((mode == "params" && isParam) ||
          (mode == "all" && mlir::isa<mlir::FloatType>(type.getElementType()))) {
        chosen.push_back(arg);
        chosenIndex.push_back(arg.getArgNumber());
      }
    }

    builder.setInsertionPoint(ret);
    size_t before = grad.getBody().front().getOperations().size();
    mlir::FailureOr<llvm::SmallVector<mlir::Value>> grads =
        buildGradients(builder, ret.getOperand(0), chosen);
    if (failed(grads)) {
      grad.erase();
      return signalPassFailure();
    }
    numBackwardOps += grad.getBody().front().getOperations().size() - before;

    llvm::SmallVector<mlir::Value> results = {ret.getOperand(0)};
    results.append(grads->begin(), grads->end());
    mlir::func::ReturnOp::create(builder, ret.getLoc(), results);
    ret.erase();
    grad.setFunctionType(builder.getFunctionType(grad.getArgumentTypes(),
                                                 mlir::ValueRange(results).getTypes()));
    grad.setAllResultAttrs(llvm::ArrayRef<mlir::DictionaryAttr>{});
    grad.setResultAttr(0, "smelt.name", builder.getStringAttr("loss"));
    for (size_t i = 0; i < chosenIndex.size(); ++i) {
      auto name = grad.getArgAttrOfType<mlir::StringAttr>(chosenIndex[i], "smelt.name");
      std::string argName = name ? name.str() : "arg" + std::to_string(chosenIndex[i]);
      grad.setResultAttr(i + 1, "smelt.name", builder.getStringAttr("grad/" + argName));
    }
  }
};

} // namespace

} // namespace smelt
