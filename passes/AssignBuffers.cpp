// smelt-assign-buffers: buffer liveness at compile time, and from it the peak bytes each device
// holds during one run, before anything runs (what `smelt compile` prints and the executors'
// measured peak must equal).
//
// The model is the compile-time schedule's (codegen/PlanSchedule.h), which the executors run,
// stated on the IR:
//   1. Every top-level op but a constant and the return is one step, in block order; a
//      constant is held by its device for the whole run, and so is, on a GPU, every argument a
//      step there reads (it is copied in) other than through a copy, whose result is that
//      argument's buffer there; the CPU reads the caller's arguments in place.
//   2. A step takes its results on its device when it runs. A value goes back after the last
//      step that reads it (right after its producer when none does); returned values, and an
//      all_reduce's operands and results (the reduction may run on until the executor waits
//      for it), stay to the end.
//   3. Each value a step takes lives from that step to its last reader. Values of one device
//      get offsets into one arena per device and run, so that two values live at once never
//      overlap (XLA's heap simulator, greedy: the largest first, each at the lowest 64-byte
//      aligned offset free over its lifetime); the arena is as long as the furthest end.
//      Values a GPU step returns stay out of it (offset -1): each is a block of its own that
//      the caller may keep on the device after the run (runtime/DeviceArray.h), or the block
//      of the donated argument it is written in place of (smelt-donate-in-place), which adds
//      no bytes.
//   4. Peak = held bytes + the arena (+ a GPU's returned values, all live at the end). The
//      most bytes live at once is a lower bound the greedy placement usually meets (a chain of
//      steps, say); when it does not, the arena wastes the difference for a run's memory being
//      one block, placed once.
//   Across devices the executor runs the compiler's schedule (codegen/PlanSchedule.h): the
//   steps cut into segments where a step that is not a copy runs on another device than the one
//   before, each run by a runner of its device as a function of its own. So each segment gets
//   an arena of its own, placed as above over its steps: a value lives to the segment's end
//   when a later segment, a copy or the caller reads it (it is what the segment hands on), and
//   a GPU segment's such values are blocks of their own. A multi-device function's peak is held
//   bytes + the most bytes live at once, which the segments' arenas meet or exceed a little.
// The results are attributes: `smelt.arena_offsets = array<i64: ...>` on each step (one per
// result) and `smelt.peak_bytes = {"cpu:0" = N : i64, ...}` on the function.
#include "passes/Passes.h"

#include "passes/ArenaPlacement.h"
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

/// Arena offsets are multiples of this: a cache line, and any vector access's alignment.
constexpr int64_t kArenaAlignment = 64;

struct DeviceUse {
  int64_t held = 0, peak = 0;
};

/// The operand `result` is written in place of (smelt-donate-in-place: its bytes are that
/// operand's), or -1.
int64_t inPlaceOperand(OpResult result) {
  auto inPlace = result.getOwner()->getAttrOfType<DenseI64ArrayAttr>("smelt.in_place");
  return inPlace ? inPlace[result.getResultNumber()] : -1;
}

/// 3. Offsets: per device, the largest value first (ties: the earlier), each at the lowest
/// aligned offset no value live at the same time covers (ArenaPlacement.h, which finds it
/// without looking at every value placed before); peak = held + the arena's extent. Returns the
/// placement's work (ArenaLayout::work).
uint64_t assignOffsets(ArrayRef<Operation *> steps, const llvm::DenseMap<Value, int64_t> &lastRead,
                       const llvm::DenseSet<Value> &returned,
                       llvm::MapVector<StringRef, DeviceUse> &devices,
                       llvm::DenseMap<Value, int64_t> &offsetOf) {
  struct DeviceValues {
    SmallVector<Value> values;
    std::vector<LiveValue> live;
    /// Returned values outside the arena: their own blocks, which the caller may keep.
    int64_t ownBlocks = 0;
  };
  llvm::MapVector<StringRef, DeviceValues> byDevice;
  for (auto [index, op] : llvm::enumerate(steps))
    for (OpResult result : op->getResults()) {
      DeviceValues &device = byDevice[deviceOf(op)];
      if (deviceOf(op) != kHost && returned.contains(result)) {
        offsetOf[result] = -1;
        // Written in place of a donated argument: its bytes, held already.
        if (inPlaceOperand(result) < 0)
          device.ownBlocks += numBytes(result);
        continue;
      }
      device.values.push_back(result);
      device.live.push_back({int64_t(index), lastRead.lookup(result), numBytes(result)});
    }
  uint64_t work = 0;
  for (auto &[device, values] : byDevice) {
    ArenaLayout layout = placeInArena(values.live, kArenaAlignment);
    for (auto [value, offset] : llvm::zip_equal(values.values, layout.offsets))
      offsetOf[value] = offset;
    work += layout.work;
    devices[device].peak = devices[device].held + layout.extent + values.ownBlocks;
  }
  for (auto &[device, use] : devices)
    use.peak = std::max(use.peak, use.held);
  return work;
}

/// 3 for a function on several devices: an arena per segment of the executor's schedule (cut
/// as codegen/PlanSchedule.cpp cuts it), each placed by assignOffsets over the segment's steps.
/// Returns the placement's work.
uint64_t assignSegmentOffsets(ArrayRef<Operation *> steps,
                              llvm::DenseMap<Value, int64_t> &offsetOf) {
  SmallVector<SmallVector<Operation *>> segments;
  StringRef device;
  for (Operation *op : steps) {
    if (isa<CopyOp>(op))
      continue; // a move between segments, not a step of one
    if (segments.empty() || deviceOf(op) != device)
      segments.emplace_back();
    device = deviceOf(op);
    segments.back().push_back(op);
  }
  uint64_t work = 0;
  for (ArrayRef<Operation *> segment : segments) {
    llvm::DenseMap<Operation *, int64_t> indexOf;
    for (auto [index, op] : llvm::enumerate(segment))
      indexOf[op] = int64_t(index);
    int64_t end = int64_t(segment.size());
    llvm::DenseMap<Value, int64_t> lastRead;
    llvm::DenseSet<Value> handedOn;
    for (auto [index, op] : llvm::enumerate(segment))
      for (Value result : op->getResults()) {
        // An all_reduce's results (and operands, below) live to the end: the executor may
        // wait for the reduction several steps later.
        int64_t last = isa<AllReduceOp>(op) ? end : int64_t(index);
        for (Operation *user : result.getUsers()) {
          auto it = indexOf.find(user);
          if (it == indexOf.end()) {
            handedOn.insert(result);
            last = end;
          } else {
            last = std::max(last, isa<AllReduceOp>(user) ? end : it->second);
          }
        }
        lastRead[result] = last;
      }
    llvm::MapVector<StringRef, DeviceUse> scratch; // the peak is the function's, walked apart
    work += assignOffsets(segment, lastRead, handedOn, scratch, offsetOf);
  }
  return work;
}

/// 3'. Without an arena: walk the steps, take results, note the peak, give back what was read
/// last; peak = held + the most bytes live at once.
void walkLiveBytes(ArrayRef<Operation *> steps, const llvm::DenseMap<Value, int64_t> &lastRead,
                   llvm::MapVector<StringRef, DeviceUse> &devices) {
  int64_t end = int64_t(steps.size());
  SmallVector<SmallVector<Value>> goBack(steps.size());
  for (auto [value, last] : lastRead)
    if (last < end)
      goBack[last].push_back(value);
  llvm::MapVector<StringRef, int64_t> live;
  for (auto &[device, use] : devices)
    use.peak = use.held;
  // Operands a result is written in place of (smelt-donate-in-place): their bytes go on as
  // the result's.
  llvm::DenseSet<Value> continued;
  for (auto [index, op] : llvm::enumerate(steps)) {
    DeviceUse &use = devices[deviceOf(op)];
    int64_t &bytes = live[deviceOf(op)];
    for (OpResult result : op->getResults()) {
      if (int64_t operand = inPlaceOperand(result); operand >= 0) {
        continued.insert(op->getOperand(unsigned(operand)));
        continue;
      }
      bytes += numBytes(result);
      use.peak = std::max(use.peak, use.held + bytes);
    }
    for (Value value : goBack[index])
      if (!continued.contains(value))
        live[deviceOf(value.getDefiningOp())] -= numBytes(value);
  }
}

struct AssignBuffersPass : impl::AssignBuffersBase<AssignBuffersPass> {
  AssignBuffersPass() = default;
  // A clone (one per thread) registers its own statistic, as the generated base's do.
  AssignBuffersPass(const AssignBuffersPass &other) : AssignBuffersBase(other) {}

  // ArenaLayout::work, summed: where LLVM keeps statistics (Release builds do not),
  // -mlir-pass-statistics shows it; AssignBuffersTest bounds the same count per value.
  Statistic numPlacementWork{this, "placement-work",
                             "Unions of arena ranges searched and updated to place values"};

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
          // A copy onto the device takes the argument there as its result, counted as such.
          StringRef device = deviceOf(op);
          if (device != kHost && !isa<CopyOp>(op) && heldArguments.insert(operand).second)
            devices[device].held += numBytes(operand);
          continue;
        }
        if (!operand.getDefiningOp<ConstantOp>())
          lastRead[operand] = collective ? end : std::max(lastRead[operand], int64_t(index));
      }
    }
    llvm::DenseSet<Value> returned;
    for (Value value : body.getTerminator()->getOperands()) {
      returned.insert(value);
      if (lastRead.count(value))
        lastRead[value] = end;
    }

    // One device and no copies: the executor runs the steps in this order and one arena holds
    // every value. Across devices, one arena per segment of its schedule.
    bool oneArena = llvm::all_of(steps, [&](Operation *op) {
      return !isa<CopyOp>(op) && deviceOf(op) == deviceOf(steps.front());
    });
    llvm::DenseMap<Value, int64_t> offsetOf;
    if (oneArena) {
      numPlacementWork += assignOffsets(steps, lastRead, returned, devices, offsetOf);
    } else {
      numPlacementWork += assignSegmentOffsets(steps, offsetOf);
      walkLiveBytes(steps, lastRead, devices);
    }
    Builder builder(&getContext());
    for (Operation *op : steps) {
      if (op->getNumResults() == 0)
        continue;
      // A copy's result is the next segment's input, which the executor places: no offset.
      SmallVector<int64_t> offsets;
      for (Value result : op->getResults()) {
        auto it = offsetOf.find(result);
        offsets.push_back(it == offsetOf.end() ? -1 : it->second);
      }
      op->setAttr("smelt.arena_offsets", builder.getDenseI64ArrayAttr(offsets));
    }
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
