// The graph of uses that smelt-fuse checks for cycles: a node per op of a block to begin with,
// nodes contracted into one as ops join fusion groups and groups merge (a group's kernel runs
// as a whole, so it is one node). It answers "does a path of uses lead from this op's node to
// that one's" exactly; on an unrolled recurrence a question costs a few ops whatever the
// number of steps (ContractedGraph.cpp says why).
#pragma once

#include "passes/OrderedList.h"

#include "mlir/IR/Block.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <bitset>
#include <vector>

namespace smelt {

class ContractedGraph {
public:
  explicit ContractedGraph(mlir::Block &block);

  /// Whether `a`'s node comes before `b`'s in the graph's topological order; a node never
  /// reaches one before it.
  bool before(mlir::Operation *a, mlir::Operation *b) const {
    return order_.before(nodeOf(a), nodeOf(b));
  }

  /// Starts a series of questions about one target: a node one of them walked is not walked
  /// again (it does not reach the target), and contract() moves what they walked.
  void beginWalk();

  /// Whether a path of uses leads from `from`'s node to `to`'s (true when they are one).
  bool reaches(mlir::Operation *from, mlir::Operation *to);

  /// Contracts the nodes of `a` and `b` into one. The caller knows that no path leads from one
  /// to the other but through an edge between them (the graph stays acyclic), and has asked
  /// since beginWalk(), with the answer no, whether each successor of the earlier node other
  /// than the later one reaches the later one (or whether the earlier node itself does).
  void contract(mlir::Operation *a, mlir::Operation *b);

  uint64_t questions() const { return questions_; }
  /// Ops whose users the walks read (a node's ops are read together).
  uint64_t walked() const { return walked_; }

private:
  unsigned nodeOf(mlir::Operation *op) const;
  bool landmarkBetween(unsigned from, unsigned to) const {
    return (reachesLandmarks_[from] & reachedByLandmarks_[to]).any();
  }

  std::vector<mlir::Operation *> ops_;                  // by position in the block
  llvm::DenseMap<mlir::Operation *, unsigned> index_;   // op -> position
  std::vector<unsigned> node_;                          // position -> node
  std::vector<llvm::SmallVector<unsigned, 1>> members_; // node -> positions of its ops
  OrderedList order_;
  /// Bit j: landmark j is reachable from the node, or reaches it (see the constructor).
  static constexpr unsigned kLandmarks = 256;
  using Landmarks = std::bitset<kLandmarks>;
  std::vector<Landmarks> reachesLandmarks_, reachedByLandmarks_;
  /// Walk marks: node i was visited in the current series if seen_[i] == epoch_.
  std::vector<uint32_t> seen_;
  uint32_t epoch_ = 0;
  llvm::SmallVector<unsigned> visited_; // in the current series, each ordered before its target
  uint64_t questions_ = 0, walked_ = 0;
};

} // namespace smelt
