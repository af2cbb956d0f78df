// smelt-assign-buffers: buffer liveness at compile time, and from it the peak bytes each device
// holds during one run, before anything runs (what `smelt compile` prints and the executors'
// measured peak must equal).
//
// The model is the executors' (runtime/BufferLiveness.h), stated on the IR:
//   1. Every top-level op but a constant and the return is one step, in block order; a
//      constant is held by its device for the whole run, and so is, on a GPU, every argument a
//      step there reads (it is copied in); the CPU reads the caller's arguments in place.
//   2. A step takes its results on its device when it runs. A value goes back after the last
//      step that reads it (right after its producer when none does); returned values, and an
//      all_reduce's operands and results (the reduction may run on until the executor waits
//      for it), stay to the end.
//   3. Peak = held bytes + the most bytes live at once, taken after each step's results are
//      taken and before what it was the last reader of goes back.
// The result is a dictionary on the function, `smelt.peak_bytes = {"cpu:0" = N : i64, ...}`.
// Offsets into one arena per device (XLA's heap simulator) would come next; until then the
// runtime's caching allocator reuses blocks in this same order.
#include "passes/Passes.h"

#include "passes/FusionUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

#define DEBUG_TYPE "smelt-assign-buffers"

namespace smelt {

#define GEN_PASS_DEF_ASSIGNBUFFERS
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

constexpr llvm::StringLiteral kHost = "cpu:0";

StringRef deviceOf(Operation *op) {
  auto placed = op->getAttrOfType<StringAttr>("smelt.device");
  return placed ? placed.getValue() : StringRef(kHost);
}

struct DeviceUse {
  int64_t held = 0, live = 0, peak = 0;
};

struct AssignBuffersPass : impl::AssignBuffersBase<AssignBuffersPass> {
  void runOnOperation() override {
    func::FuncOp function = getOperation();
    if (function.isExternal())
      return;
    Block &body = function.getBody().front();

    // 1. The steps, and when each value is read last (steps.size(): to the end of the run).
    SmallVector<Operation *> steps;
    llvm::MapVector<StringRef, DeviceUse> devices;
    for (Operation &op : body) {
      if (op.hasTrait<mlir::OpTrait::IsTerminator>())
        continue;
      if (isa<ConstantOp>(op)) {
        devices[deviceOf(&op)].held += numBytes(op.getResult(0));
        continue;
      }
      steps.push_back(&op);
    }
    int64_t end = int64_t(steps.size());
    llvm::DenseMap<Value, int64_t> lastRead;
    llvm::DenseSet<Value> heldArguments;
    for (auto [index, op] : llvm::enumerate(steps)) {
      bool collective = isa<AllReduceOp>(op);
      for (Value result : op->getResults())
        lastRead[result] = collective ? end : std::max<int64_t>(lastRead.lookup(result), index);
      for (Value operand : op->getOperands()) {
        if (isa<BlockArgument>(operand)) {
          StringRef device = deviceOf(op);
          if (device != kHost && heldArguments.insert(operand).second)
            devices[device].held += numBytes(operand);
          continue;
        }
        if (!operand.getDefiningOp<ConstantOp>())
          lastRead[operand] = collective ? end : std::max(lastRead[operand], int64_t(index));
      }
    }
    for (Value returned : body.getTerminator()->getOperands())
      if (lastRead.count(returned))
        lastRead[returned] = end;

    // 2-3. Walk the steps: take results, note the peak, give back what was read last.
    SmallVector<SmallVector<Value>> goBack(steps.size());
    for (auto [value, last] : lastRead)
      if (last < end)
        goBack[last].push_back(value);
    for (auto &[device, use] : devices)
      use.peak = use.held;
    for (auto [index, op] : llvm::enumerate(steps)) {
      DeviceUse &use = devices[deviceOf(op)];
      for (Value result : op->getResults()) {
        use.live += numBytes(result);
        use.peak = std::max(use.peak, use.held + use.live);
      }
      for (Value value : goBack[index])
        devices[deviceOf(value.getDefiningOp())].live -= numBytes(value);
    }

    Builder builder(&getContext());
    SmallVector<NamedAttribute> peaks;
    for (auto &[device, use] : devices) {
      peaks.push_back(builder.getNamedAttr(device, builder.getI64IntegerAttr(use.peak)));
      numPeakBytes += use.peak;
    }
    function->setAttr("smelt.peak_bytes", builder.getDictionaryAttr(peaks));
  }
};

} // namespace

} // namespace smelt
