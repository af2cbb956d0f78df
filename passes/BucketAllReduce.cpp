// smelt-bucket-all-reduce: combines the all_reduces of a data-parallel step into buckets (one
// collective over a flat buffer of many gradients) and moves each bucket up to where its last
// operand is produced, so the executor starts it while the backward pass goes on.
//
// The algorithm, per function body (one block):
//   1. Number the ops. For each all_reduce note when it is ready (the position of its last
//      operand's producer) and when it is first needed (its first user's position).
//   2. Group all_reduces that can share a collective (kind, replicas, element type, device)
//      and sort each group by readiness: the order the backward pass produces gradients.
//   3. Fill buckets greedily in that order. A candidate joins the open bucket when the bucket
//      stays within bucket-bytes (an empty bucket takes anything) and the bucket, now ready
//      later, is still ready before any member's first user; otherwise the bucket closes.
//   4. Replace each bucket by one all_reduce right after its last operand's producer.
#include "passes/Passes.h"

#include "passes/FusionUtils.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

#define DEBUG_TYPE "smelt-bucket-all-reduce"

namespace smelt {

#define GEN_PASS_DEF_BUCKETALLREDUCE
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

struct Candidate {
  AllReduceOp op;
  /// Position of the last operand's producer (-1: only arguments), and of the first user.
  int64_t ready = -1;
  int64_t firstUse = 0;
  int64_t bytes = 0;
};

struct Bucket {
  SmallVector<Candidate *> members;
  int64_t ready = -1;
  int64_t firstUse = 0;
  int64_t bytes = 0;
};

/// What must match for two all_reduces to travel in one collective.
using BucketKey = std::tuple<AllReduceKind, int64_t, Type, Attribute>;

BucketKey keyOf(AllReduceOp op) {
  Type element = cast<RankedTensorType>(op.getXs()[0].getType()).getElementType();
  return {op.getKind(), op.getReplicas(), element, op->getAttr("smelt.device")};
}

struct BucketAllReducePass : impl::BucketAllReduceBase<BucketAllReducePass> {
  using BucketAllReduceBase::BucketAllReduceBase;

  void runOnOperation() override {
    if (bucketBytes < 0) {
      getOperation().emitError() << "smelt-bucket-all-reduce: bucket-bytes = " << int64_t(bucketBytes)
                                 << " must be >= 0";
      return signalPassFailure();
    }
    for (auto function : getOperation().getOps<func::FuncOp>())
      if (!function.isExternal())
        runOnBlock(function.getBody().front());
  }

  void runOnBlock(Block &block) {
    // 1. Positions, readiness and first use.
    DenseMap<Operation *, int64_t> position;
    for (auto [i, op] : llvm::enumerate(block))
      position[&op] = int64_t(i);
    std::vector<Candidate> candidates;
    for (auto op : block.getOps<AllReduceOp>()) {
      Candidate c{op};
      for (Value x : op.getXs()) {
        if (Operation *producer = x.getDefiningOp())
          c.ready = std::max(c.ready, position.at(producer));
        c.bytes += numBytes(x);
      }
      c.firstUse = int64_t(block.getOperations().size());
      for (Operation *user : op->getUsers())
        c.firstUse = std::min(c.firstUse, position.at(block.findAncestorOpInBlock(*user)));
      candidates.push_back(c);
    }
    // 2. Groups that may share a collective, each in readiness order. Groups keep the order
    //    of their first member: every replica must build the same collectives in one order.
    llvm::MapVector<BucketKey, SmallVector<Candidate *>> groups;
    for (Candidate &c : candidates)
      groups[keyOf(c.op)].push_back(&c);
    // 3. Greedy buckets.
    std::vector<Bucket> buckets;
    for (auto &[key, group] : groups) {
      llvm::stable_sort(group, [&](Candidate *a, Candidate *b) { return a->ready < b->ready; });
      Bucket open;
      for (Candidate *c : group) {
        int64_t ready = std::max(open.ready, c->ready);
        bool fits = open.members.empty() || open.bytes + c->bytes <= bucketBytes;
        bool early = ready < std::min(open.firstUse, c->firstUse);
        if (!open.members.empty() && !(fits && early)) {
          buckets.push_back(std::move(open));
          open = Bucket();
        }
        if (open.members.empty())
          open.firstUse = c->firstUse;
        open.members.push_back(c);
        open.ready = std::max(open.ready, c->ready);
        open.firstUse = std::min(open.firstUse, c->firstUse);
        open.bytes += c->bytes;
      }
      if (!open.members.empty())
        buckets.push_back(std::move(open));
    }
    // 4. One all_reduce per bucket, right after its last operand's producer.
    SmallVector<Operation *> byPosition(block.getOperations().size());
    for (auto &[op, i] : position)
      byPosition[i] = op;
    // Buckets ready at the same op keep their order: each goes after the one placed before.
    DenseMap<Operation *, Operation *> lastPlacedAfter;
    for (Bucket &bucket : buckets) {
      Operation *producer = bucket.ready < 0 ? nullptr : byPosition[bucket.ready];
      Operation *&after = lastPlacedAfter[producer];
      after = rewrite(block, bucket, after ? after : producer);
    }
  }

  /// Makes `bucket` one all_reduce right after `after` (null: at the top); returns it.
  Operation *rewrite(Block &block, Bucket &bucket, Operation *after) {
    OpBuilder builder(&block, block.begin());
    if (after)
      builder.setInsertionPointAfter(after);
    AllReduceOp first = bucket.members.front()->op;
    if (bucket.members.size() == 1) {
      if (first != &*builder.getInsertionPoint())
        first->moveBefore(&*builder.getInsertionPoint());
      ++numBuckets;
      return first;
    }
    SmallVector<Value> operands;
    SmallVector<Location> locations;
    for (Candidate *c : bucket.members) {
      llvm::append_range(operands, c->op.getXs());
      locations.push_back(c->op.getLoc());
    }
    auto combined = AllReduceOp::create(builder, builder.getFusedLoc(locations), first.getKind(),
                                        operands, first.getReplicas());
    if (Attribute device = first->getAttr("smelt.device"))
      combined->setAttr("smelt.device", device);
    unsigned next = 0;
    for (Candidate *c : bucket.members) {
      for (Value result : c->op.getResults())
        result.replaceAllUsesWith(combined.getResult(next++));
      c->op.erase();
    }
    ++numBuckets;
    numCombined += bucket.members.size() - 1;
    return combined;
  }
};

} // namespace

} // namespace smelt
