// smelt-mixed-precision: Keras' mixed_bfloat16 / mixed_float16 policies as a rewrite of the
// functions of a module: matmuls and convolutions compute in bf16/f16, the elementwise and
// shape ops between them follow, everything numerically delicate stays f32. Run it on the
// forward (loss) function before smelt-autodiff, as the builder does (Graph::applyPrecision
// runs this pass), so the gradient flows back through the casts to f32 master weights.
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;

#define DEBUG_TYPE "smelt-mixed-precision"

namespace smelt {

#define GEN_PASS_DEF_MIXEDPRECISION
#include "passes/Passes.h.inc"

std::optional<PrecisionPolicy> parsePrecisionPolicy(StringRef name) {
  if (name == "f32")
    return PrecisionPolicy::f32;
  if (name == "mixed_bf16")
    return PrecisionPolicy::mixed_bf16;
  if (name == "mixed_f16")
    return PrecisionPolicy::mixed_f16;
  return std::nullopt;
}

StringRef precisionPolicyName(PrecisionPolicy policy) {
  switch (policy) {
  case PrecisionPolicy::mixed_bf16:
    return "mixed_bf16";
  case PrecisionPolicy::mixed_f16:
    return "mixed_f16";
  default:
    return "f32";
  }
}

namespace {

struct MixedPrecisionStats {
  unsigned lowPrecisionOps = 0; // ops now computing in bf16/f16
  unsigned casts = 0;           // converts left in the block
};

/// Rewrites the f32 ops of `block` (f64 and integer ops are left alone) under `policy`, each op
/// in the list its ODS facts name (Smelt_Precision, read through OpFacts):
///  1. allow list (matmul, conv2d and its gradients): f32 operands are converted to the low
///     type and the op computes in it;
///  2. infer list (elementwise arithmetic without exp/log/pow/sqrt/rsqrt/erf/sin/cos, compare, select,
///     shape ops, pooling): computes in the low type when an operand already is and every
///     other f32 operand is cheap to cast (a splat constant, a block argument such as an f32
///     master weight, or a broadcast or reshape of one);
///  3. deny list (everything else: exp, log, reductions, argmax, random numbers ...) and every
///     value the block's users see stay f32.
/// A rewritten op is cloned in the low type and its old results are replaced by a convert back
/// to f32, so every existing value keeps its type; a later low op reads the low value directly
/// (the cast pair folds). Replaced ops are erased when `eraseReplaced`, else left unused (the
/// builder's tensor handles may still name them; canonicalization removes them).
/// Gradients taken afterwards (smelt-autodiff) flow back through the converts, so master
/// weights get f32 gradients.

using List = PrecisionClass;

/// The op's class as it states it (Smelt_Precision in ir/SmeltOps.td); ops of other dialects
/// stay f32.
List listOf(Operation *op) {
  auto facts = dyn_cast<OpFacts>(op);
  return facts ? facts.getPrecisionClass() : List::Deny;
}

bool isF32Tensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.getElementType().isF32();
}

RankedTensorType withElement(Type type, Type element) {
  return cast<RankedTensorType>(type).clone(element);
}

class Rewriter {
public:
  Rewriter(Block &block, Type low) : block_(block), low_(low) {}

  MixedPrecisionStats run(bool eraseReplaced) {
    SmallVector<Operation *> ops;
    for (Operation &op : block_) // a builder's block has no terminator yet
      ops.push_back(&op);
    for (Operation *op : ops) {
      List list = listOf(op);
      if (list == List::Deny || !llvm::any_of(op->getOperands(), isF32Tensor) ||
          llvm::any_of(op->getResultTypes(), [](Type t) {
            auto type = dyn_cast<RankedTensorType>(t);
            return type && isa<FloatType>(type.getElementType()) && !type.getElementType().isF32();
          }))
        continue;
      if (list == List::Infer && !followsLowOperands(op))
        continue;
      lower(op);
      if (eraseReplaced)
        op->erase();
    }
    // Casts made here that nobody read (for an op that was later left in f32); the block's
    // own ops stay, since a builder may still hold them.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block_)))
      if (created_.contains(&op) && op.use_empty())
        op.erase();
    for (Operation &op : block_)
      stats_.casts += isa<ConvertOp>(op);
    return stats_;
  }

private:
  /// The low-precision value `v` holds, when it is a convert from it.
  Value lowSource(Value v) {
    if (auto convert = v.getDefiningOp<ConvertOp>())
      if (convert.getX().getType().getElementType() == low_)
        return convert.getX();
    return {};
  }

  /// Whether casting `v` to the low type is as good as computing it there: constants, the
  /// block's arguments (master weights, inputs) and broadcasts or reshapes of them.
  bool cheapToCast(Value v) {
    if (isa<BlockArgument>(v))
      return true;
    Operation *def = v.getDefiningOp();
    if (auto constant = dyn_cast<ConstantOp>(def))
      return isa<SplatElementsAttr>(constant.getValue());
    if (isa<BroadcastInDimOp, ReshapeOp>(def))
      return cheapToCast(def->getOperand(0)) || lowSource(def->getOperand(0));
    return false;
  }

  bool followsLowOperands(Operation *op) {
    bool anyLow = false;
    for (Value operand : op->getOperands()) {
      if (!isF32Tensor(operand))
        continue;
      if (lowSource(operand))
        anyLow = true;
      else if (!cheapToCast(operand))
        return false;
    }
    return anyLow;
  }

  /// `v` in the low type: the value it was converted from, or a new (cached) convert.
  Value toLow(Value v, OpBuilder &builder) {
    if (Value source = lowSource(v))
      return source;
    auto [it, inserted] = lowered_.try_emplace(v, Value());
    if (inserted) {
      OpBuilder::InsertionGuard guard(builder);
      builder.setInsertionPointAfterValue(v);
      it->second = ConvertOp::create(builder, v.getLoc(), withElement(v.getType(), low_), v);
      created_.insert(it->second.getDefiningOp());
    }
    return it->second;
  }

  void lower(Operation *op) {
    OpBuilder builder(op);
    IRMapping mapping;
    for (Value operand : op->getOperands())
      if (isF32Tensor(operand))
        mapping.map(operand, toLow(operand, builder));
    Operation *clone = builder.clone(*op, mapping);
    for (auto [old, result] : llvm::zip(op->getResults(), clone->getResults())) {
      if (!isF32Tensor(old)) { // compare's i1
        old.replaceAllUsesWith(result);
        continue;
      }
      result.setType(withElement(old.getType(), low_));
      old.replaceAllUsesWith(ConvertOp::create(builder, op->getLoc(), old.getType(), result));
    }
    ++stats_.lowPrecisionOps;
  }

  Block &block_;
  Type low_;
  DenseMap<Value, Value> lowered_;
  SmallPtrSet<Operation *, 16> created_;
  MixedPrecisionStats stats_;
};

MixedPrecisionStats applyMixedPrecision(Block &block, PrecisionPolicy policy, bool eraseReplaced) {
  if (policy == PrecisionPolicy::f32 || block.empty())
    return {};
  MLIRContext *context = block.getParentOp()->getContext();
  Type low = policy == PrecisionPolicy::mixed_bf16 ? Type(BFloat16Type::get(context))
                                                   : Type(Float16Type::get(context));
  return Rewriter(block, low).run(eraseReplaced);
}

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
      MixedPrecisionStats stats =
          applyMixedPrecision(function.getBody().front(), *parsed, !keepReplaced);
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
