// Reverse-mode autodiff: relevance marking, the reverse walk, gradient accumulation.
#include "ir/Autodiff.h"

#include "ir/SmeltDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace smelt {

namespace {

Value zerosLike(OpBuilder &b, Location loc, Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return ConstantOp::create(
      b, loc, DenseElementsAttr::get(tensor, b.getFloatAttr(tensor.getElementType(), 0.0)));
}

bool isFloatTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && isa<FloatType>(tensor.getElementType());
}

} // namespace

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
  llvm::DenseMap<Value, Value> grads;
  auto accumulate = [&](Value v, Value g) {
    auto [it, inserted] = grads.try_emplace(v, g);
    if (!inserted)
      it->second = AddOp::create(builder, g.getLoc(), it->second, g);
  };
  grads[loss] = ConstantOp::create(
      builder, loc, DenseElementsAttr::get(lossType, builder.getFloatAttr(
                                                         lossType.getElementType(), 1.0)));
  for (Operation *op : relevant) {
    // Gradient rules take one result's gradient; ops with several results (fusions, all_reduce
    // buckets) are made by passes that run after autodiff.
    if (op->getNumResults() != 1)
      return op->emitOpError("has ")
             << op->getNumResults()
             << " results and no gradient rule for that; differentiate before the passes that "
                "make such ops (smelt-bucket-all-reduce, smelt-fuse)";
    Value g = grads.lookup(op->getResult(0));
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
    Value g = grads.lookup(w);
    result.push_back(g ? g : zerosLike(builder, w.getLoc(), w.getType()));
  }
  return result;
}

} // namespace smelt
