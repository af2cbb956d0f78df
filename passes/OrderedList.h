// An order-maintenance list: nodes 0..n-1 in a sequence whose order two integer labels compare
// in O(1), where a run of nodes can be moved to just after another node. smelt-fuse keeps its
// contracted graph topologically sorted with it (Fuser::reaches, Fuser::contract).
#pragma once

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace smelt {

class OrderedList {
public:
  /// Nodes 0..n-1, in that order.
  explicit OrderedList(unsigned n);

  bool before(unsigned a, unsigned b) const { return label_[a] < label_[b]; }
  uint64_t label(unsigned node) const { return label_[node]; }

  /// Takes `node` out of the sequence; it must not be used again.
  void erase(unsigned node);

  /// Moves `nodes` (distinct, in list order, none of them `anchor`) to just after `anchor`, in
  /// that order; the others keep their order. O(nodes) amortized, with a relabeling now and
  /// then of O(log n) nodes amortized per node moved.
  void moveAfter(unsigned anchor, llvm::ArrayRef<unsigned> nodes);

private:
  static constexpr unsigned kNone = ~0u;
  void unlink(unsigned node);
  void relabelAround(unsigned first, unsigned last, unsigned count);

  std::vector<uint64_t> label_;
  std::vector<unsigned> prev_, next_;
};

} // namespace smelt
