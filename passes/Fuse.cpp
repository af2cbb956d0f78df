// smelt-fuse: XLA-style producer-consumer and sibling fusion of elementwise, remap and reduce
// ops into smelt.fusion regions, each of which codegen renders as one kernel.
//
// Algorithm (Passes.td shows an example):
//  1. Walk the ops from the last to the first. An op not yet taken by a fusion that can sit in
//     a kernel (FusionRole other than None/Source) roots a new group: a reduce roots a
//     `reduction` group over its operand's shape, anything else a `loop` group over its
//     result's shape.
//  2. Grow the group through its operands, deciding for each producer P:
//     - veto: P is a library op or a reduce (a reduce ends its own kernel: no reduce into
//       reduce, no reduce into an elementwise consumer), a slice of a value sliced more than
//       kMaxFusedSlicesOfOneValue times, or the group already holds kMaxOpsPerFusion ops
//       (sibling merges respect the cap too);
//     - fuse: every user of P is in the group, and the cost model agrees:
//         saved = 2 * bytes(P) + kLaunchBytes      (P is neither written nor read back, and
//                                                   needs no kernel of its own)
//         recompute = (elements evaluated - elements(P)) * elementCost(P) / kFlopsPerByte
//       where "elements evaluated" is the group's iteration count when P is read through a
//       broadcast; fuse when saved >= recompute;
//     - duplicate: P is a source, a broadcast (it reads its smaller operand instead), or a
//       cheap op whose users all sit in fusions, so it is never written at all, and which
//       recomputes at most kMaxRecomputedOps ops with it (not a recurrence's carried state);
//     - multi-output: P has the group's iteration shape in a loop group and none of its other
//       users reaches the group (that would be a cycle): P moves in and is also a result;
//     - otherwise reject, with the reason.
//     A slice, pad or concat left alone in its group on the CPU is no kernel: it stays the
//     runtime's copy step.
//  3. Merge sibling groups: two groups of the same kind and iteration space (and axes) that
//     read a common value and do not depend on each other become one multi-output kernel.
//  4. Outline every group as a smelt.fusion, drop duplicated originals left unused, and
//     restore a topological order.
// Before step 1, epilogue folding (Epilogues.h) moves the bias adds and activations that a
// matmul's or conv2d's library call applies into the op; what remains is fused as above.
// Every decision is recorded; `report=<file>` writes them ("-" for stdout).
//
// The cycle checks (multi-output, sibling merging) ask whether a path of uses leads from one
// op into a group, on a graph with one node per group and per op in none (ContractedGraph.h):
// exact answers, in time linear in an unrolled recurrence's steps.
#include "passes/ContractedGraph.h"
#include "passes/Epilogues.h"
#include "passes/FusionUtils.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <set>

#define DEBUG_TYPE "smelt-fuse"

namespace smelt {

#define GEN_PASS_DEF_FUSE
#include "passes/Passes.h.inc"

namespace {

using namespace mlir;

/// Bytes of memory traffic a kernel launch is worth (a few microseconds on a GPU).
constexpr int64_t kLaunchBytes = 16384;
/// Arithmetic that costs as much time as moving one byte.
constexpr int64_t kFlopsPerByte = 8;
/// The most ops one kernel holds. Compilers take super-linear time in a kernel's size (LLVM's
/// loop vectorizer in the number of uses of a shared value such as a polynomial coefficient,
/// NVRTC in the length of the body): a chain of 4,000 ops fused into one kernel took 5 s on
/// the CPU and 20,000 ops 122 s. Capped, a long chain becomes kernels of this size and
/// compiles in linear time; one intermediate tensor per 256 ops costs nothing measurable.
constexpr size_t kMaxOpsPerFusion = 256;
/// The most kernels a cheap op (not a source or broadcast) is copied into (Fuser::decide).
constexpr size_t kMaxCopies = 16;
/// The most ops a copy of a cheap op may recompute with it (Fuser::recomputesTooMuch).
constexpr size_t kMaxRecomputedOps = 32;
/// The most slices of one value from outside a kernel that fuse into their consumers. An
/// unrolled recurrence slices its input projection once per step; fused, those slices would
/// make every step's kernels differ by an offset and compile once per step (the char LSTM's
/// cold compile went from 0.5 s to 3.7 s), where copied out they share one kernel.
constexpr size_t kMaxFusedSlicesOfOneValue = 8;

struct Group {
  FusionKind kind;
  SmallVector<int64_t> shape;   // iteration space
  SmallVector<int64_t> axes;    // reduced axes, for a reduction group
  Operation *root;
  SetVector<Operation *> members; // moved in
  SmallPtrSet<Operation *, 8> duplicated;
  std::vector<std::string> log;
  bool merged = false;
};

std::string shapeText(ArrayRef<int64_t> shape) {
  std::string s;
  for (int64_t d : shape)
    s += (s.empty() ? "" : "x") + std::to_string(d);
  return s.empty() ? "scalar" : s;
}

class Fuser {
public:
  Fuser(func::FuncOp function, bool oneOpPerKernel)
      : function_(function), oneOpPerKernel_(oneOpPerKernel) {}

  void run() {
    Block &block = function_.getBody().front();
    SmallVector<Operation *> ops;
    for (Operation &op : block)
      ops.push_back(&op);
    graph_ = std::make_unique<ContractedGraph>(block);
    for (Operation *op : llvm::reverse(ops)) {
      FusionRole role = fusionRole(op);
      if (role == FusionRole::None || groupOf_.count(op))
        continue;
      // A splat constant stays a constant: a library call reads it from memory. Fused, sources
      // are copied into the kernels that read them, and an iota that is left over (a result,
      // or read by a library call) becomes a kernel of its own: only kernels compute.
      if (role == FusionRole::Source && !isa<IotaOp>(op))
        continue;
      if (diesAfterDuplication(op))
        continue;
      if (oneOpPerKernel_) {
        // Each op a kernel of its own, as XLA runs ops without fusion; the splat constants and
        // iotas it reads are still computed in place, which costs nothing.
        unsigned id = newGroup(op);
        for (Value operand : op->getOperands())
          if (Operation *producer = operand.getDefiningOp();
              producer && fusionRole(producer) == FusionRole::Source)
            decide(id, producer);
        keepAloneMoveAsCopy(id);
        continue;
      }
      unsigned id = newGroup(op);
      growGroup(id);
      keepAloneMoveAsCopy(id);
    }
    if (!oneOpPerKernel_)
      mergeSiblings();
  }

  /// Outlines the groups; returns how many fusions were made.
  unsigned outline() {
    Block &block = function_.getBody().front();
    unsigned made = 0;
    // Number the fusions in program order of their roots, as a reader meets them.
    DenseMap<Operation *, unsigned> position;
    for (Operation &op : block)
      position[&op] = position.size();
    llvm::stable_sort(groups_, [&](const Group &a, const Group &b) {
      return position[a.root] < position[b.root];
    });
    // A group's sets can name an op that an earlier outlining erased (an op that is the root
    // of its own group and copied into others): its address may now hold one of the fusions
    // made here, which must never be taken for it (a fusion nested in a fusion). The others
    // then read that op's value from the fusion that computes it. Members are put in block
    // order by their positions, not by a scan of the block for each group (quadratic in an
    // unrolled recurrence).
    DenseSet<Operation *> erased;
    for (Group &g : groups_) {
      if (g.merged)
        continue;
      SetVector<Operation *> taken;
      for (Operation *op : g.members)
        if (!erased.contains(op))
          taken.insert(op);
      for (Operation *op : g.duplicated)
        if (!erased.contains(op))
          taken.insert(op);
      SmallVector<Operation *> members(taken.begin(), taken.end());
      llvm::sort(members, [&](Operation *a, Operation *b) { return position[a] < position[b]; });
      auto device = g.root->getAttrOfType<StringAttr>("smelt.device"); // the root is erased
      SmallVector<Operation *> gone;
      FusionOp fusion = outlineFusion(g.kind, members, g.duplicated, gone);
      erased.insert(gone.begin(), gone.end());
      if (device)
        fusion->setAttr("smelt.device", device);
      fusion->setAttr("smelt.fusion_id", IntegerAttr::get(IntegerType::get(fusion.getContext(), 64),
                                                          made));
      g.log.insert(g.log.begin(), "fusion " + std::to_string(made) + " (" +
                                      stringifyFusionKind(g.kind).str() + " over " +
                                      shapeText(g.shape) + ", " +
                                      std::to_string(fusion.getNumResults()) + " result" +
                                      (fusion.getNumResults() == 1 ? "" : "s") + ", " +
                                      std::to_string(members.size()) + " ops)");
      ++made;
    }
    // Duplicated originals whose every user now reads its own copy.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (fusionRole(&op) != FusionRole::None && op.use_empty())
        op.erase();
    sortTopologicallyInLinearTime(block);
    return made;
  }

  /// Folds epilogues into the function's contractions first; their lines lead the report.
  unsigned foldEpilogues(bool convs) { return smelt::foldEpilogues(function_, convs, epilogueLog_); }

  void writeReport(llvm::raw_ostream &os) {
    os << "smelt-fuse report for @" << function_.getSymName() << "\n";
    for (const std::string &line : epilogueLog_)
      os << line << "\n";
    for (Group &g : groups_) {
      if (g.merged)
        continue;
      for (size_t i = 0; i < g.log.size(); ++i)
        os << (i ? "  " : "") << g.log[i] << "\n";
    }
    // The pass's own work, which must grow linearly with the function (tests count it).
    os << "reachability: " << (graph_ ? graph_->questions() : 0) << " questions, "
       << (graph_ ? graph_->walked() : 0) << " ops walked\n";
  }

  unsigned numDuplicated = 0, numRejected = 0, numMerged = 0;

private:
  unsigned newGroup(Operation *root) {
    Group g;
    g.root = root;
    if (auto reduce = dyn_cast<ReduceOp>(root)) {
      g.kind = FusionKind::reduction;
      g.shape = SmallVector<int64_t>(reduce.getX().getType().getShape());
      g.axes = SmallVector<int64_t>(reduce.getAxes());
    } else {
      g.kind = FusionKind::loop;
      g.shape = SmallVector<int64_t>(cast<RankedTensorType>(root->getResult(0).getType()).getShape());
    }
    g.members.insert(root);
    g.log.push_back("root " + describe(root));
    groups_.push_back(std::move(g));
    groupOf_[root] = groups_.size() - 1;
    return groups_.size() - 1;
  }

  /// A slice, pad or concat that fused with nothing stays the CPU runtime's copy step: as a
  /// kernel it would be compiled for nothing (and per slice, where slices differ by offset
  /// alone). The GPU has no such steps; there it stays a kernel.
  void keepAloneMoveAsCopy(unsigned id) {
    Group &g = groups_[id];
    if (size(g) != 1 || !isa<SliceOp, PadOp, ConcatOp>(g.root) || !hasCopySteps(g.root) ||
        id + 1 != groups_.size())
      return;
    groupOf_.erase(g.root);
    runtimeCopies_.insert(g.root);
    groups_.pop_back();
  }

  /// Whether `value` is read by more than kMaxFusedSlicesOfOneValue slices.
  static bool slicedManyTimes(Value value) {
    return llvm::count_if(value.getUsers(), [](Operation *user) { return isa<SliceOp>(user); }) >
           int64_t(kMaxFusedSlicesOfOneValue);
  }

  /// Whether every user of `producer` moved into group `id`.
  bool usedOnlyInside(Operation *producer, unsigned id) {
    return llvm::all_of(producer->getUsers(), [&](Operation *user) {
      auto it = groupOf_.find(user);
      return it != groupOf_.end() && it->second == id;
    });
  }

  /// Whether group `id` computes `op` itself (moved in or copied).
  bool holds(unsigned id, Operation *op) {
    return groups_[id].members.contains(op) || groups_[id].duplicated.contains(op);
  }

  /// An op every reader computes for itself: each user is in a group that holds a copy of
  /// it, or is itself such an op whose copies all hold a copy of it too. A user in a group of
  /// its own may also have been copied into others (a batch norm's scale, cheap to recompute
  /// in a slice of the activations but not in a larger one): those copies read `op` too, so
  /// they must hold it as well, or `op` is left behind outside every kernel.
  bool diesAfterDuplication(Operation *op) {
    if (op->use_empty())
      return false;
    for (Operation *user : op->getUsers()) {
      if (auto copies = copiedInto_.find(user); copies != copiedInto_.end())
        for (unsigned holder : copies->second)
          if (!holds(holder, op))
            return false;
      if (dead_.contains(user))
        continue;
      auto it = groupOf_.find(user);
      if (it == groupOf_.end() || !groups_[it->second].duplicated.contains(op))
        return false;
    }
    dead_.insert(op);
    return true;
  }

  /// Whether a copy of `op` would recompute more than kMaxRecomputedOps ops: the fusible ops
  /// it reads, those they read, and so on, up to library ops, reduces, sources and arguments.
  /// The cost model above prices `op` alone, reading its operands; but operands that are
  /// never written must be recomputed too. An unrolled LSTM's cell state c_t = f c_{t-1} + i g
  /// reads every step before it: copied into step t + 1's kernel, it took the steps before it
  /// along (up to the fusion's cap), and the ops copied there could no longer fuse into their
  /// own step's kernel, which fell apart into one kernel per op (9 per step).
  bool recomputesTooMuch(Operation *op) {
    SmallVector<Operation *> work{op};
    SmallPtrSet<Operation *, 16> seen{op};
    while (!work.empty()) {
      Operation *consumer = work.pop_back_val();
      for (Value operand : consumer->getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer)
          continue;
        FusionRole role = fusionRole(producer);
        if (role == FusionRole::None || role == FusionRole::Source || role == FusionRole::Reduce ||
            !seen.insert(producer).second)
          continue;
        if (seen.size() > kMaxRecomputedOps)
          return true;
        work.push_back(producer);
      }
    }
    return false;
  }

  /// How many times the group evaluates `producer`'s elements, per element it has.
  int64_t evaluationsPerElement(const Group &g, Operation *producer) {
    int64_t evaluated = 1;
    for (int64_t d : g.shape)
      evaluated *= d;
    return std::max<int64_t>(1, evaluated / std::max<int64_t>(1, numElements(producer->getResult(0))));
  }

  /// Moves `producer` into group `id`: its node and the group's become one. The caller has
  /// asked, since graph_->beginWalk(), whether each of its users outside the group leads into
  /// the group, with the answer no (ContractedGraph::contract).
  void join(Operation *producer, unsigned id) {
    groups_[id].members.insert(producer);
    graph_->contract(producer, groups_[id].root);
    groupOf_[producer] = id;
  }

  void growGroup(unsigned id) {
    SmallVector<Operation *> work{groups_[id].root};
    DenseSet<Operation *> considered;
    while (!work.empty()) {
      Operation *consumer = work.pop_back_val();
      for (Value operand : consumer->getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || !considered.insert(producer).second)
          continue;
        if (groups_[id].members.contains(producer) || groups_[id].duplicated.contains(producer))
          continue;
        if (decide(id, producer))
          work.push_back(producer);
      }
    }
  }

  /// Decides whether `producer` joins group `id`; logs why. True when it joined.
  bool decide(unsigned id, Operation *producer) {
    Group &g = groups_[id];
    FusionRole role = fusionRole(producer);
    auto reject = [&](const std::string &why) {
      if (role != FusionRole::None)
        ++numRejected;
      g.log.push_back("not fused: " + describe(producer) + ": " + why);
      return false;
    };
    if (role == FusionRole::None)
      return isa<ConstantOp>(producer) ? false
             : reject(isa<CopyOp>(producer) ? "a copy between devices"
                                            : "no kernel renders it (library op)");
    if (groupOf_.count(producer))
      return reject("already in another fusion");
    if (deviceOf(producer) != deviceOf(g.root))
      return reject("placed on " + deviceOf(producer).str() + ", the fusion on " +
                    deviceOf(g.root).str());
    if (role == FusionRole::Reduce)
      return reject(g.kind == FusionKind::reduction
                        ? "a reduce does not fuse into a reduce"
                        : "a reduce ends its own kernel; its consumers start another");
    if (auto slice = dyn_cast<SliceOp>(producer); slice && slicedManyTimes(slice.getX()))
      return reject("one of many slices of its operand: fused, each would make its kernel differ "
                    "from its siblings' by the offset alone (an unrolled recurrence's steps), "
                    "compiled once per slice instead of once");
    if (size(g) >= kMaxOpsPerFusion)
      return reject("the fusion is full (" + std::to_string(kMaxOpsPerFusion) +
                    " ops: larger kernels compile in super-linear time)");
    if (role == FusionRole::Source) {
      g.duplicated.insert(producer);
      copied_.insert(producer);
      copiedInto_[producer].push_back(id);
      ++numDuplicated;
      g.log.push_back("duplicated: " + describe(producer) + ": free to recompute");
      return true;
    }
    int64_t evaluations = evaluationsPerElement(g, producer);
    int64_t elements = numElements(producer->getResult(0));
    int64_t recomputeBytes = (evaluations - 1) * elements * elementCost(producer) / kFlopsPerByte;
    if (usedOnlyInside(producer, id) && !copied_.contains(producer)) {
      int64_t saved = 2 * numBytes(producer->getResult(0)) + kLaunchBytes;
      if (saved < recomputeBytes)
        return reject("recomputing it " + std::to_string(evaluations) + "x costs more (" +
                      std::to_string(recomputeBytes) + " B-equivalent) than it saves (" +
                      std::to_string(saved) + " B)");
      graph_->beginWalk(); // its only successor is the group: nothing to ask
      join(producer, id);
      g.log.push_back("fused: " + describe(producer) + ": only used here");
      return true;
    }
    if (isa<BroadcastInDimOp>(producer)) {
      g.duplicated.insert(producer);
      copied_.insert(producer);
      copiedInto_[producer].push_back(id);
      ++numDuplicated;
      g.log.push_back("duplicated: " + describe(producer) + ": reads its smaller operand instead");
      return true;
    }
    // Copied into every consumer, P is never written or read back; each extra copy
    // recomputes it and reads its operands again. (Counting only the part a slice reads made
    // the LSTM's gate pre-activations copies: recomputed in the backward kernels, they kept
    // the recurrent matmuls' results alive, 13.5 -> 19.1 MiB planned at 32 steps, for no
    // measurable speed.)
    bool everyUserFusible = llvm::all_of(producer->getUsers(), [&](Operation *user) {
      FusionRole r = fusionRole(user);
      return r != FusionRole::None && r != FusionRole::Source && !runtimeCopies_.contains(user);
    });
    int64_t users = std::distance(producer->getUsers().begin(), producer->getUsers().end());
    int64_t operandBytes = 0;
    for (Value operand : producer->getOperands())
      operandBytes += numBytes(operand);
    int64_t saved = numBytes(producer->getResult(0)) * (1 + users);
    int64_t cost = (users - 1) * (elements * elementCost(producer) / kFlopsPerByte + operandBytes) +
                   users * recomputeBytes;
    // At most kMaxCopies kernels recompute one op: copies of copies otherwise recompute a
    // whole chain in every kernel below it (an LSTM's cell state c_t = f c_{t-1} + i g, copied
    // into each step's kernel with all the steps before it: kernels of 6, 12, ... 186 ops,
    // quadratic in the steps).
    if (everyUserFusible && saved >= cost && copiedInto_[producer].size() < kMaxCopies &&
        !recomputesTooMuch(producer)) {
      g.duplicated.insert(producer);
      copied_.insert(producer);
      copiedInto_[producer].push_back(id);
      ++numDuplicated;
      g.log.push_back("duplicated: " + describe(producer) + ": every user is fused, so it is " +
                      "never written (saves " + std::to_string(saved) + " B, recomputing costs " +
                      std::to_string(cost) + " B-equivalent)");
      return true;
    }
    if (g.kind == FusionKind::loop && !copied_.contains(producer) &&
        cast<RankedTensorType>(producer->getResult(0).getType()).getShape() ==
            ArrayRef<int64_t>(g.shape)) {
      graph_->beginWalk();
      for (Operation *user : producer->getUsers())
        if (!g.members.contains(user) && graph_->reaches(user, g.root))
          return reject("its user " + describe(user) + " leads back into this fusion");
      join(producer, id);
      g.log.push_back("fused as an extra result: " + describe(producer) +
                      ": also used outside, written once by this kernel");
      return true;
    }
    return reject("used outside this fusion and too costly to recompute");
  }

  /// Ops the group's kernel holds (members include the root).
  static size_t size(const Group &g) { return g.members.size() + g.duplicated.size(); }

  /// Values a group reads from outside.
  SetVector<Value> inputsOf(const Group &g) {
    SetVector<Value> inputs;
    auto add = [&](Operation *op) {
      for (Value v : op->getOperands())
        if (!v.getDefiningOp() || !g.members.contains(v.getDefiningOp()))
          inputs.insert(v);
    };
    for (Operation *op : g.members)
      add(op);
    for (Operation *op : g.duplicated)
      add(op);
    return inputs;
  }

  bool sameSpace(const Group &a, const Group &b) {
    return a.kind == b.kind && a.shape == b.shape && a.axes == b.axes &&
           deviceOf(a.root) == deviceOf(b.root);
  }

  void mergeSiblings() {
    // Each group's inputs computed once (and again only for a group that grew): recomputing
    // both sides for every pair made this pass quadratic in the ops of a whole training step
    // (1.0 s of the GPT step's 1.05 s pipeline).
    std::vector<std::optional<SetVector<Value>>> inputs(groups_.size());
    auto inputsFor = [&](unsigned g) -> const SetVector<Value> & {
      if (!inputs[g])
        inputs[g] = inputsOf(groups_[g]);
      return *inputs[g];
    };
    // A splat constant or iota read by both is no reason to merge: each kernel computes it in
    // place for free. (In an unrolled recurrence every step's gradient reads the same ones, and
    // pairing all the steps through them made this loop quadratic in the steps.)
    // Nor is a value that a group reads only through slices: the steps of an unrolled
    // recurrence each slice their own part of the inputs' projection, and merged they would
    // share no read (pairing them through it was quadratic in the steps, too).
    auto sharable = [&](Value v, unsigned g) {
      Operation *producer = v.getDefiningOp();
      if (producer && fusionRole(producer) == FusionRole::Source)
        return false;
      return llvm::any_of(v.getUsers(),
                          [&](Operation *user) { return !isa<SliceOp>(user) && holds(g, user); });
    };
    // The groups reading each value: a group's only candidates are those sharing an input
    // with it, not every later group (a scan of all pairs was quadratic in the groups).
    DenseMap<Value, SmallVector<unsigned>> readers;
    for (unsigned g = 0; g < groups_.size(); ++g)
      for (Value v : inputsFor(g))
        if (sharable(v, g))
          readers[v].push_back(g);
    for (unsigned a = 0; a < groups_.size(); ++a) {
      if (groups_[a].merged)
        continue;
      // Later groups sharing an input with `a`, taken in order; a merge adds the new inputs'.
      std::set<unsigned> candidates;
      auto addCandidates = [&](unsigned after) {
        for (Value v : inputsFor(a))
          if (auto it = readers.find(v); it != readers.end())
            for (unsigned g : it->second)
              if (g > after)
                candidates.insert(g);
      };
      addCandidates(a);
      while (!candidates.empty()) {
        unsigned b = *candidates.begin();
        candidates.erase(candidates.begin());
        if (groups_[b].merged || !sameSpace(groups_[a], groups_[b]) ||
            size(groups_[a]) + size(groups_[b]) > kMaxOpsPerFusion)
          continue;
        const SetVector<Value> &ia = inputsFor(a), &ib = inputsFor(b);
        auto shared = llvm::find_if(
            ia, [&](Value v) { return ib.contains(v) && sharable(v, a) && sharable(v, b); });
        if (shared == ia.end())
          continue;
        Group &into = groups_[a], &from = groups_[b];
        // A node never reaches one ordered before it: one question answers both ways.
        bool aFirst = graph_->before(into.root, from.root);
        Operation *early = aFirst ? into.root : from.root, *later = aFirst ? from.root : into.root;
        graph_->beginWalk();
        if (graph_->reaches(early, later))
          continue;
        graph_->contract(early, later);
        std::string what;
        llvm::raw_string_ostream os(what);
        // One numbering of the function's values for every merge: printAsOperand without a
        // state numbers (and verifies) the whole function each time, quadratic in its size.
        if (!names_)
          names_ = std::make_unique<AsmState>(function_);
        shared->printAsOperand(os, *names_);
        into.log.push_back("merged sibling: the fusion rooted at " + describe(from.root) +
                           " (both read " + what + ")");
        for (Operation *op : from.members) {
          into.members.insert(op);
          groupOf_[op] = a;
        }
        for (Operation *op : from.duplicated)
          if (!into.members.contains(op))
            into.duplicated.insert(op);
        for (size_t i = 1; i < from.log.size(); ++i)
          into.log.push_back(from.log[i]);
        from.merged = true;
        inputs[a].reset(); // `into` grew; `shared` and `what` are used up
        addCandidates(b);
        ++numMerged;
      }
    }
  }

  func::FuncOp function_;
  bool oneOpPerKernel_;
  std::vector<std::string> epilogueLog_;
  std::vector<Group> groups_;
  DenseMap<Operation *, unsigned> groupOf_;
  std::unique_ptr<AsmState> names_; // value names for the report, made once
  std::unique_ptr<ContractedGraph> graph_; // groups as nodes, for the cycle checks
  DenseSet<Operation *> dead_;
  /// Slices, pads and concats left to the runtime's copy steps (keepAloneMoveAsCopy).
  DenseSet<Operation *> runtimeCopies_;
  /// Ops some group holds a copy of: they never move into another group, so every copy's
  /// original stays for outlining.
  DenseSet<Operation *> copied_;
  DenseMap<Operation *, SmallVector<unsigned, 2>> copiedInto_;
};

// A module pass, so the report lists the functions in order from one thread.
struct FusePass : impl::FuseBase<FusePass> {
  using FuseBase::FuseBase;

  void runOnOperation() override {
    std::string report;
    llvm::raw_string_ostream os(report);
    for (auto function : getOperation().getOps<func::FuncOp>()) {
      if (function.isExternal())
        continue;
      Fuser fuser(function, oneOpPerKernel);
      if (epilogues && !oneOpPerKernel)
        numEpilogues += fuser.foldEpilogues(convEpilogues);
      fuser.run();
      numFusions += fuser.outline();
      fuser.writeReport(os);
      numDuplicated += fuser.numDuplicated;
      numRejected += fuser.numRejected;
      numSiblingsMerged += fuser.numMerged;
    }
    if (reportPath.empty())
      return;
    if (reportPath == "-") {
      llvm::outs() << report;
      return;
    }
    std::error_code error;
    llvm::raw_fd_ostream file(reportPath, error);
    if (!error) {
      file << report;
      file.close();
      error = file.error();
      file.clear_error(); // the stream's destructor aborts on an error nobody cleared
    }
    if (error) {
      getOperation().emitError() << "smelt-fuse: cannot write the report to '" << reportPath
                                 << "': " << error.message();
      return signalPassFailure();
    }
  }
};

} // namespace

} // namespace smelt
