// smelt-autodiff: reverse-mode automatic differentiation. Clones the loss function as
// @<func>_grad and appends the reverse pass, returning the loss and the chosen arguments'
// gradients. The builder's Graph::gradients runs this pass too (frontend/Graph.cpp).
#include "passes/Passes.h"

#include "passes/GradientSum.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

#define DEBUG_TYPE "smelt-autodiff"

namespace smelt {

#define GEN_PASS_DEF_AUTODIFF
#include "passes/Passes.h.inc"

namespace {

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

/// Builds, at `builder`'s insertion point, the gradient of the rank-0 float `loss` with
/// respect to each value of `wrt` (float tensors of the same block, usually its arguments):
///  1. marks the values that depend on some `wrt` (a forward walk) and those `loss` depends on
///     (a backward walk); only ops on both paths are differentiated, so unused gradient work is
///     never built;
///  2. seeds d loss = 1 and visits those ops in reverse, asking each for its vector-Jacobian
///     product (DifferentiableOpInterface); a value used more than once gets the sum of its
///     users' gradients once they are all built (sumGradients: slices' pads join into one
///     concat);
///  3. ops that state Smelt_NoGradient (compare, argmax, iota, rng, constant) stop the gradient.
/// A `wrt` value the loss does not depend on gets a zero gradient. Fails with a diagnostic on
/// the op that has no gradient rule.
FailureOr<SmallVector<Value>> buildGradients(OpBuilder &builder, Value loss, ValueRange wrt) {
  Location loc = loss.getLoc();
  auto lossType = dyn_cast<RankedTensorType>(loss.getType());
  if (!lossType || lossType.getRank() != 0 || !isFloatTensor(lossType))
    return emitError(loc) << "autodiff needs a rank-0 float loss, got " << loss.getType();
  for (Value w : wrt)
    if (!isFloatTensor(w.getType()))
      return emitError(w.getLoc()) << "cannot differentiate with respect to a value of type "
                                   << w.getType() << ": gradients need float tensors";
  Block *block = loss.getParentBlock();

  // 1. Relevance: forward from wrt, backward from loss.
  llvm::DenseSet<Value> fromWrt(wrt.begin(), wrt.end());
  for (Operation &op : *block)
    if (llvm::any_of(op.getOperands(), [&](Value v) { return fromWrt.contains(v); }))
      fromWrt.insert(op.result_begin(), op.result_end());
  llvm::DenseSet<Value> toLoss = {loss};
  SmallVector<Operation *> relevant;
  for (Operation &op : llvm::reverse(*block)) {
    if (llvm::none_of(op.getResults(), [&](Value r) { return toLoss.contains(r); }))
      continue;
    toLoss.insert(op.operand_begin(), op.operand_end());
    if (llvm::any_of(op.getResults(), [&](Value r) { return fromWrt.contains(r); }))
      relevant.push_back(&op); // already in reverse order
  }

  // 2. The reverse walk.
  // Each value's gradients from its users, summed when the walk reaches the value's own op
  // (every user comes after it, so every contribution is in by then).
  llvm::DenseMap<Value, SmallVector<Value, 1>> grads;
  auto accumulate = [&](Value v, Value g) { grads[v].push_back(g); };
  auto gradientOf = [&](Value v) -> Value {
    auto it = grads.find(v);
    if (it == grads.end())
      return Value();
    if (it->second.size() > 1)
      it->second = {sumGradients(builder, it->second)};
    return it->second.front();
  };
  grads[loss].push_back(ConstantOp::create(
      builder, loc,
      DenseElementsAttr::get(lossType, builder.getFloatAttr(lossType.getElementType(), 1.0))));
  for (Operation *op : relevant) {
    // Gradient rules take one result's gradient; ops with several results (fusions, all_reduce
    // buckets) are made by passes that run after autodiff.
    if (op->getNumResults() != 1)
      return op->emitOpError("has ")
             << op->getNumResults()
             << " results and no gradient rule for that; differentiate before the passes that "
                "make such ops (smelt-bucket-all-reduce, smelt-fuse)";
    Value g = gradientOf(op->getResult(0));
    if (!g)
      continue;
    auto differentiable = dyn_cast<DifferentiableOpInterface>(op);
    if (!differentiable) {
      // 3. Piecewise-constant or source ops stop the gradient.
      if (auto facts = dyn_cast<OpFacts>(op); facts && facts.stopsGradient())
        continue;
      return op->emitOpError("has no gradient rule; it cannot sit between the loss and a "
                             "value being differentiated");
    }
    SmallVector<Value> operandGrads;
    if (failed(differentiable.vjp(builder, g, operandGrads)))
      return failure();
    for (auto [operand, operandGrad] : llvm::zip(op->getOperands(), operandGrads))
      if (operandGrad && fromWrt.contains(operand))
        accumulate(operand, operandGrad);
  }

  SmallVector<Value> result;
  for (Value w : wrt) {
    Value g = gradientOf(w);
    result.push_back(g ? g : zerosLike(builder, w.getLoc(), w.getType()));
  }
  return result;
}

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
    // Which arguments: params, all float ones, or a list of argument numbers (JAX's argnums).
    llvm::SmallDenseSet<unsigned> numbered;
    if (mode != "params" && mode != "all") {
      llvm::SmallVector<llvm::StringRef> items;
      llvm::StringRef(mode).split(items, ',');
      for (llvm::StringRef item : items) {
        unsigned index;
        if (item.trim().getAsInteger(10, index) || index >= loss.getNumArguments()) {
          loss.emitOpError("smelt-autodiff: wrt='")
              << mode << "' must be 'params', 'all' or argument numbers below "
              << loss.getNumArguments() << " ('0,2')";
          return signalPassFailure();
        }
        numbered.insert(index);
      }
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
      if ((mode == "params" && isParam) || numbered.contains(arg.getArgNumber()) ||
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
