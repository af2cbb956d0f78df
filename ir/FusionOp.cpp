// The fusion op's verifier: what codegen may assume about a fusion body (codegen/FusionWalk.h
// renders exactly these ops, in these shapes).
#include "ir/SmeltDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"

using namespace mlir;

namespace smelt {

namespace {

/// Ops a kernel computes element by element: the body of every fusion is made of these.
bool isFusibleBodyOp(Operation *op) {
  if (auto constant = dyn_cast<ConstantOp>(op)) // one value for every element
    return isa<SplatElementsAttr>(constant.getValue());
  auto facts = dyn_cast<OpFacts>(op);
  return facts && facts.getFusionRole() != FusionRole::None;
}

} // namespace

YieldOp FusionOp::getYield() { return cast<YieldOp>(getBody().front().getTerminator()); }

ArrayRef<int64_t> FusionOp::getIterationShape() {
  Value first = getYield().getValues().front();
  if (getKind() == FusionKind::reduction)
    first = first.getDefiningOp<ReduceOp>().getX();
  return cast<RankedTensorType>(first.getType()).getShape();
}

LogicalResult FusionOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError("body takes ") << body.getNumArguments() << " arguments but the fusion has "
                                      << getInputs().size() << " inputs";
  for (auto [i, input, arg] : llvm::enumerate(getInputs(), body.getArguments()))
    if (input.getType() != arg.getType())
      return emitOpError("input #") << i << " is " << input.getType()
                                    << " but body argument #" << i << " is " << arg.getType();
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError("body must end with smelt.yield");
  if (yield.getValues().empty())
    return emitOpError("yields nothing; a fusion computes at least one result");
  if (yield.getValues().getTypes() != getResultTypes())
    return emitOpError("yields (") << yield.getValues().getTypes() << ") but its results are ("
                                   << getResultTypes() << ")";
  for (Operation &op : body.without_terminator()) {
    if (!isFusibleBodyOp(&op))
      return op.emitOpError("cannot be inside a fusion: a fusion body holds elementwise, convert, "
                            "broadcast_in_dim, reshape, transpose, slice, concat, pad, gather, "
                            "iota, rng_uniform, rng_normal, splat constant and reduce ops");
    if (auto reduce = dyn_cast<ReduceOp>(op)) {
      if (getKind() != FusionKind::reduction)
        return op.emitOpError("is inside a loop fusion; reduces are the roots of reduction "
                              "fusions");
      for (Operation *user : reduce->getUsers())
        if (!isa<YieldOp>(user))
          return op.emitOpError("feeds '") << user->getName()
                                           << "' inside the fusion; a reduce is only yielded";
    }
  }
  Value first = yield.getValues().front();
  for (auto [i, value] : llvm::enumerate(yield.getValues())) {
    if (getKind() == FusionKind::loop) {
      auto shape = cast<RankedTensorType>(value.getType()).getShape();
      if (shape != cast<RankedTensorType>(first.getType()).getShape())
        return emitOpError("result #") << i << " is " << value.getType()
                                       << " but result #0 is " << first.getType()
                                       << "; a loop fusion's results share one shape";
      continue;
    }
    auto reduce = value.getDefiningOp<ReduceOp>();
    auto root = first.getDefiningOp<ReduceOp>();
    if (!reduce || !root)
      return emitOpError("result #") << i << " is not a reduce; a reduction fusion yields reduces";
    if (reduce.getX().getType().getShape() != root.getX().getType().getShape() ||
        reduce.getAxes() != root.getAxes())
      return emitOpError("result #")
             << i << " reduces " << reduce.getX().getType() << " over different axes or shape "
             << "than result #0 (" << root.getX().getType()
             << "); a reduction fusion's reduces share one iteration space";
  }
  return success();
}

} // namespace smelt
