// smelt-donate-in-place: a donated argument's buffer becomes the buffer of the result that
// replaces it, so that a train step updates its parameters and optimizer state in place (XLA's
// input/output aliasing under donation, JAX's donate_argnums): no second copy of the state is
// ever live, and the state's addresses stay the same from step to step.
//
// An argument marked `smelt.donated` (the caller gives its buffer to the run) is written in
// place by a result of the last step that reads it when:
//   - the function runs on one GPU, its only copies those of arguments onto it and those of
//     results to the host for the return (one segment: the executor owns every argument's
//     buffer for the run, having copied it in or taken it over, and hands results back from
//     the GPU); the argument's value there is itself, or its one copy;
//   - that step is a loop fusion, and inside it the argument flows only through elementwise
//     ops of its own shape: each element is read only by the thread that writes the same
//     element of the result, before it writes it (the CUDA loop kernel stores after loading);
//   - the result has the argument's type, is returned, and the argument is not.
// Among a fusion's results of the right type the one returned under the argument's name
// (smelt.name, as the Trainer names a state's new value) is preferred, so that the state keeps
// its block from step to step. The choice is `smelt.in_place = array<i64: ...>` on the fusion,
// one entry per result: the input it overwrites, or -1. Codegen drops `__restrict__` between
// the two, smelt-assign-buffers gives the result no bytes of its own, and the GPU executor
// writes the result into the argument's block when the run owns it (else into a fresh one).
#include "passes/Passes.h"

#include "passes/FusionUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace smelt {

#define GEN_PASS_DEF_DONATEINPLACE
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

/// Whether the fusion body reads `input` only at the loop index: every op its value flows
/// through is elementwise and of its shape, up to the yield.
bool readOnlyElementwise(BlockArgument input) {
  auto shape = cast<RankedTensorType>(input.getType()).getShape();
  SmallVector<Value> work{input};
  llvm::DenseSet<Operation *> seen;
  while (!work.empty()) {
    Value value = work.pop_back_val();
    for (Operation *user : value.getUsers()) {
      if (user->hasTrait<mlir::OpTrait::IsTerminator>() || !seen.insert(user).second)
        continue;
      if (fusionRole(user) != FusionRole::Elementwise)
        return false;
      for (Value result : user->getResults()) {
        auto type = dyn_cast<RankedTensorType>(result.getType());
        if (!type || type.getShape() != shape)
          return false;
        work.push_back(result);
      }
    }
  }
  return true;
}

struct DonateInPlacePass : impl::DonateInPlaceBase<DonateInPlacePass> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.isExternal())
      return;
    Block &body = function.getBody().front();
    Operation *ret = body.getTerminator();
    SmallVector<Operation *> steps;
    for (Operation &op : body)
      if (&op != ret && !isa<ConstantOp>(op))
        steps.push_back(&op);
    if (steps.empty())
      return;
    // A copy in reads an argument; a copy out is only returned.
    auto copyIn = [](Operation *op) {
      return isa<CopyOp>(op) && isa<BlockArgument>(op->getOperand(0));
    };
    auto copyOut = [&](Operation *op) {
      return isa<CopyOp>(op) &&
             llvm::all_of(op->getUsers(), [&](Operation *user) { return user == ret; });
    };
    auto gpuStep = llvm::find_if(steps, [&](Operation *op) { return !copyOut(op); });
    if (gpuStep == steps.end())
      return;
    StringRef device = deviceOf(*gpuStep);
    if (!device.starts_with("gpu:") || llvm::any_of(steps, [&](Operation *op) {
          return !copyOut(op) && (deviceOf(op) != device || (isa<CopyOp>(op) && !copyIn(op)));
        }))
      return;

    // The step that reads each value last, and the name each returned value goes out under.
    llvm::DenseMap<Value, Operation *> lastReader;
    for (Operation *op : steps)
      for (Value operand : op->getOperands())
        lastReader[operand] = op;
    // A value copied out is returned as what the copy returns.
    llvm::DenseMap<Value, SmallVector<StringRef>> returnedAs;
    for (OpOperand &use : ret->getOpOperands()) {
      auto name = function.getResultAttrOfType<StringAttr>(use.getOperandNumber(), "smelt.name");
      Value value = use.get();
      if (Operation *copy = value.getDefiningOp(); copy && copyOut(copy))
        value = copy->getOperand(0);
      returnedAs[value].push_back(name ? name.getValue() : StringRef());
    }

    llvm::DenseMap<Operation *, SmallVector<int64_t>> inPlace;
    for (BlockArgument argument : body.getArguments()) {
      if (!function.getArgAttr(argument.getArgNumber(), "smelt.donated") ||
          returnedAs.count(argument))
        continue;
      // Its value on the GPU: itself, or the copy that brings it there.
      Value onDevice = argument;
      if (argument.hasOneUse())
        if (auto copy = dyn_cast<CopyOp>(*argument.getUsers().begin()))
          onDevice = copy.getResult();
      if (returnedAs.count(onDevice))
        continue;
      auto fusion = dyn_cast_or_null<FusionOp>(lastReader.lookup(onDevice));
      if (!fusion || fusion.getKind() != FusionKind::loop)
        continue;
      std::optional<int64_t> input;
      bool elementwise = true;
      for (auto [i, value] : llvm::enumerate(fusion.getInputs()))
        if (value == onDevice) {
          input = input.value_or(int64_t(i));
          elementwise = elementwise && readOnlyElementwise(fusion.getBody().getArgument(i));
        }
      if (!elementwise)
        continue;
      auto name = function.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "smelt.name");
      SmallVector<int64_t> &chosen = inPlace[fusion];
      chosen.resize(fusion->getNumResults(), -1);
      std::optional<unsigned> pick;
      for (OpResult result : fusion->getResults()) {
        auto out = returnedAs.find(result);
        if (chosen[result.getResultNumber()] >= 0 || result.getType() != argument.getType() ||
            out == returnedAs.end())
          continue;
        bool sameName = name && llvm::is_contained(out->second, name.getValue());
        if (!pick || sameName)
          pick = result.getResultNumber();
        if (sameName)
          break;
      }
      if (pick)
        chosen[*pick] = *input;
    }
    Builder builder(&getContext());
    for (auto &[fusion, chosen] : inPlace)
      if (llvm::any_of(chosen, [](int64_t i) { return i >= 0; }))
        fusion->setAttr("smelt.in_place", builder.getDenseI64ArrayAttr(chosen));
  }
};

} // namespace

} // namespace smelt
