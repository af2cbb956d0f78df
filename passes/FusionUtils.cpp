// Op classification, per-element cost and outlining for smelt-fuse.
#include "passes/FusionUtils.h"

#include "ir/LocationText.h"

#include "mlir/Analysis/TopologicalSortUtils.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace smelt {

FusionRole fusionRole(Operation *op) {
  if (auto constant = dyn_cast<ConstantOp>(op))
    return isa<SplatElementsAttr>(constant.getValue()) ? FusionRole::Source : FusionRole::None;
  if (auto concat = dyn_cast<ConcatOp>(op);
      concat && concat.getInputs().size() > kMaxFusedConcatOperands && hasCopySteps(op))
    return FusionRole::None;
  auto facts = dyn_cast<OpFacts>(op);
  return facts ? facts.getFusionRole() : FusionRole::None;
}

int64_t elementCost(Operation *op) {
  auto facts = dyn_cast<OpFacts>(op);
  return facts ? facts.getElementCost() : 1;
}

std::string describe(Operation *op) {
  std::string text = opAndLocation(op);
  if (op->getNumResults() == 1) {
    std::string type;
    llvm::raw_string_ostream os(type);
    os << op->getResult(0).getType();
    text += " " + type;
  }
  return text;
}

StringRef deviceOf(Operation *op) {
  auto device = op->getAttrOfType<StringAttr>("smelt.device");
  return device ? device.getValue() : StringRef();
}

bool hasCopySteps(Operation *op) { return !deviceOf(op).starts_with("gpu:"); }

int64_t numElements(Value value) {
  return cast<RankedTensorType>(value.getType()).getNumElements();
}

int64_t numBytes(Value value) {
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  int64_t width = element.isInteger(1) ? 1 : int64_t(element.getIntOrFloatBitWidth() / 8);
  return numElements(value) * width;
}

FusionOp outlineFusion(FusionKind kind, ArrayRef<Operation *> members,
                       const SmallPtrSetImpl<Operation *> &duplicated,
                       SmallVectorImpl<Operation *> &erased) {
  SmallPtrSet<Operation *, 16> inside(members.begin(), members.end());
  // A duplicated member's original stays for users outside, so it reads from outside too.
  auto outside = [&](Operation *user) {
    return !inside.contains(user) || duplicated.contains(user);
  };
  SetVector<Value> inputs;
  SmallVector<Value> results;
  for (Operation *op : members) {
    for (Value operand : op->getOperands()) {
      Operation *producer = operand.getDefiningOp();
      if (!producer || !inside.contains(producer))
        inputs.insert(operand);
    }
    if (duplicated.contains(op))
      continue;
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUsers(), outside))
        results.push_back(result);
  }

  // The fusion is where its first member that says where it is came from: a constant folded
  // by canonicalization has lost its location.
  Location loc = members.front()->getLoc();
  for (Operation *op : members)
    if (!locationText(op->getLoc()).empty()) {
      loc = op->getLoc();
      break;
    }
  OpBuilder builder(members.front());
  auto fusion =
      FusionOp::create(builder, loc, ValueRange(results).getTypes(), kind, inputs.getArrayRef());
  Block *body = builder.createBlock(&fusion.getBody());
  IRMapping mapping;
  for (Value input : inputs)
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  for (Operation *op : members)
    builder.clone(*op, mapping);
  SmallVector<Value> yielded;
  for (Value result : results)
    yielded.push_back(mapping.lookup(result));
  YieldOp::create(builder, fusion.getLoc(), yielded);

  for (auto [result, replacement] : llvm::zip(results, fusion.getResults()))
    result.replaceUsesWithIf(replacement, [&](OpOperand &use) {
      return use.getOwner() != fusion && outside(use.getOwner());
    });
  // Moved members are now unused outside; erase users before producers.
  for (Operation *op : llvm::reverse(members))
    if (!duplicated.contains(op) && op->use_empty()) {
      erased.push_back(op);
      op->erase();
    }
  return fusion;
}

void sortTopologicallyInLinearTime(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  if (!ops.empty() && ops.back()->hasTrait<mlir::OpTrait::IsTerminator>())
    ops.pop_back(); // stays last
  DenseMap<Operation *, unsigned> position;
  for (auto [i, op] : llvm::enumerate(ops))
    position[op] = i;
  // Each op's producers in the block; Kahn's algorithm visits producers before their users.
  std::vector<SmallVector<unsigned, 2>> users(ops.size());
  std::vector<unsigned> waiting(ops.size(), 0);
  for (auto [i, op] : llvm::enumerate(ops))
    for (Value operand : op->getOperands())
      if (auto it = position.find(operand.getDefiningOp()); it != position.end()) {
        users[it->second].push_back(i);
        ++waiting[i];
      }
  // A scan takes an op once its producers are taken: by an earlier scan, or earlier in the
  // same one (before it in the block). So its sweep is the latest of its producers', one later
  // for a producer that sits after it.
  std::vector<unsigned> sweep(ops.size(), 0);
  SmallVector<unsigned> ready;
  for (unsigned i = 0; i < ops.size(); ++i)
    if (!waiting[i])
      ready.push_back(i);
  unsigned done = 0, sweeps = 0;
  while (!ready.empty()) {
    unsigned i = ready.pop_back_val();
    ++done;
    sweeps = std::max(sweeps, sweep[i] + 1);
    for (unsigned user : users[i]) {
      sweep[user] = std::max(sweep[user], sweep[i] + (i > user ? 1 : 0));
      if (--waiting[user] == 0)
        ready.push_back(user);
    }
  }
  if (done != ops.size()) { // a cycle: the library function leaves it as it is
    sortTopologically(&block);
    return;
  }
  std::vector<SmallVector<Operation *>> bySweep(sweeps);
  for (auto [i, op] : llvm::enumerate(ops))
    bySweep[sweep[i]].push_back(op);
  Operation *end = ops.size() < block.getOperations().size() ? &block.back() : nullptr;
  for (ArrayRef<Operation *> taken : bySweep)
    for (Operation *op : taken)
      end ? op->moveBefore(end) : op->moveBefore(&block, block.end());
}

} // namespace smelt
