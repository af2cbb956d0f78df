// smelt-group-host-steps: orders a function placed on a GPU and the CPU so that the host's
// steps break the device's work into as few segments as they can (codegen/PlanSchedule.h cuts
// the function wherever the device changes, and each cut costs the host a wait for the GPU).
//
// The algorithm, per function body (one block), with "host step" meaning an op placed on cpu:0
// (a copy to the host included) other than an all_reduce, whose order across replicas
// smelt-bucket-all-reduce fixed:
//   1. Hoist: host steps that need nothing a device computes (their operands are arguments,
//      constants or other such steps' results) move, in their order, to the top, where they
//      form one host segment before the device's work.
//   2. Sink: from the last op up, every other host step, and every copy onto a device of a
//      host step's result, moves down to just before its first user (the return when it has
//      none), past the device work that does not need it. Going upwards, a chain of host steps
//      sinks whole, and the device work between them joins one segment.
// A function without a GPU step is left as it is.
#include "passes/Passes.h"

#include "passes/FusionUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace smelt {

#define GEN_PASS_DEF_GROUPHOSTSTEPS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

bool onHost(Operation *op) { return deviceOf(op) == "cpu:0"; }

/// Whether `op` is a host step the pass may move: not a constant (no step), not a collective.
bool movableHostStep(Operation *op) {
  return onHost(op) && !isa<ConstantOp, AllReduceOp>(op) &&
         !op->hasTrait<mlir::OpTrait::IsTerminator>();
}

/// Whether `op` copies a host step's result onto a device: it moves with that step.
bool uploadOfHostStep(Operation *op) {
  if (!isa<CopyOp>(op) || onHost(op))
    return false;
  Operation *source = op->getOperand(0).getDefiningOp();
  return source && movableHostStep(source);
}

/// The first op of `body` that uses a result of `op` (the terminator when none does).
Operation *firstUser(Operation *op, Block &body) {
  Operation *first = body.getTerminator();
  for (Operation *user : op->getUsers())
    if (Operation *inBody = body.findAncestorOpInBlock(*user))
      if (inBody->isBeforeInBlock(first))
        first = inBody;
  return first;
}

struct GroupHostSteps : impl::GroupHostStepsBase<GroupHostSteps> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.getBody().empty())
      return;
    Block &body = function.getBody().front();
    if (llvm::none_of(body, [](Operation &op) { return deviceOf(&op).starts_with("gpu:"); }))
      return;
    hoist(body);
    sink(body);
    early_.clear();
  }

  /// The host steps that need nothing a device computes (hoisted; they do not sink).
  llvm::DenseSet<Operation *> early_;

  void hoist(Block &body) {
    SmallVector<Operation *> hoisted;
    for (Operation &op : body) {
      bool needsNoDevice = llvm::all_of(op.getOperands(), [&](Value v) {
        Operation *def = v.getDefiningOp();
        return !def || isa<ConstantOp>(def) || early_.contains(def);
      });
      if (movableHostStep(&op) && needsNoDevice) {
        early_.insert(&op);
        hoisted.push_back(&op);
      }
    }
    // They go, in order, before the first op that is neither one of them nor a constant, with
    // the constants they read that are below it (a constant reads nothing: it may go up).
    Operation *anchor = nullptr;
    for (Operation &op : body)
      if (!isa<ConstantOp>(op) && !early_.contains(&op)) {
        anchor = &op;
        break;
      }
    for (Operation *op : hoisted) {
      if (op->isBeforeInBlock(anchor))
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && isa<ConstantOp>(def) && anchor->isBeforeInBlock(def))
          def->moveBefore(anchor);
      op->moveBefore(anchor);
      ++numHoisted;
    }
  }

  void sink(Block &body) {
    SmallVector<Operation *> candidates;
    for (Operation &op : body)
      if ((movableHostStep(&op) || uploadOfHostStep(&op)) && !early_.contains(&op))
        candidates.push_back(&op);
    for (Operation *op : llvm::reverse(candidates)) {
      Operation *user = firstUser(op, body);
      if (op->getNextNode() == user)
        continue;
      op->moveBefore(user);
      ++numSunk;
    }
  }
};

} // namespace

} // namespace smelt
