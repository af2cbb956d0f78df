// The order-maintenance list of OrderedList.h: a doubly linked list of nodes with increasing
// 62-bit labels. A move gives the moved nodes labels spread over the gap after the anchor;
// where the gap is too small it relabels the smallest aligned range of labels around the anchor
// that is sparse enough, as in Bender, Cole, Demaine, Farach-Colton and Zito, "Two simplified
// algorithms for maintaining order in a list" (ESA 2002): O(log n) relabels amortized per
// node inserted.
#include "passes/OrderedList.h"

#include "llvm/Support/ErrorHandling.h"

namespace smelt {

namespace {

constexpr int kBits = 62;
constexpr uint64_t kUniverse = uint64_t(1) << kBits;
/// A range of 2^i labels is sparse enough to relabel when it holds at most (2/T)^i nodes, for a
/// constant 1 < T < 2; the paper's bound holds for any, and T = 1.5 leaves room for
/// (4/3)^62 = 5.6e7 nodes.
constexpr double kGrowth = 4.0 / 3.0;

} // namespace

OrderedList::OrderedList(unsigned n) : label_(n), prev_(n), next_(n) {
  uint64_t step = kUniverse / (uint64_t(n) + 1);
  for (unsigned i = 0; i < n; ++i) {
    label_[i] = (i + 1) * step;
    prev_[i] = i == 0 ? kNone : i - 1;
    next_[i] = i + 1 == n ? kNone : i + 1;
  }
}

void OrderedList::unlink(unsigned node) {
  if (prev_[node] != kNone)
    next_[prev_[node]] = next_[node];
  if (next_[node] != kNone)
    prev_[next_[node]] = prev_[node];
  prev_[node] = next_[node] = kNone;
}

void OrderedList::erase(unsigned node) { unlink(node); }

void OrderedList::moveAfter(unsigned anchor, llvm::ArrayRef<unsigned> nodes) {
  if (nodes.empty())
    return;
  unsigned at = anchor;
  for (unsigned node : nodes) {
    unlink(node);
    prev_[node] = at;
    next_[node] = next_[at];
    if (next_[at] != kNone)
      prev_[next_[at]] = node;
    next_[at] = node;
    at = node;
  }
  uint64_t lo = label_[anchor], hi = next_[at] == kNone ? kUniverse : label_[next_[at]];
  uint64_t m = nodes.size();
  if (hi - lo > m) {
    uint64_t step = (hi - lo) / (m + 1);
    for (uint64_t k = 0; k < m; ++k)
      label_[nodes[k]] = lo + (k + 1) * step;
    return;
  }
  // Labels that keep the list sorted (equal to the anchor's) so the scan below can count them.
  for (unsigned node : nodes)
    label_[node] = lo;
  relabelAround(anchor, at, m + 1);
}

/// Spreads the labels of the smallest sparse enough range of 2^i labels that holds `first` to
/// `last` (`count` nodes, contiguous) evenly over it. The ranges nest, so the scan for each
/// larger one goes on from the last.
void OrderedList::relabelAround(unsigned first, unsigned last, unsigned count) {
  uint64_t at = label_[first];
  double limit = 1;
  for (int i = 1; i <= kBits; ++i) {
    limit *= kGrowth;
    uint64_t size = uint64_t(1) << i;
    uint64_t base = at & ~(size - 1), end = base + size;
    while (prev_[first] != kNone && label_[prev_[first]] >= base) {
      first = prev_[first];
      ++count;
    }
    while (next_[last] != kNone && label_[next_[last]] < end) {
      last = next_[last];
      ++count;
    }
    if (count > limit)
      continue;
    uint64_t step = size / count, label = base; // >= 1: limit < 2^i
    for (unsigned node = first;; node = next_[node], label += step) {
      label_[node] = label;
      if (node == last)
        return;
    }
  }
  llvm::report_fatal_error("OrderedList: more nodes than its labels can order");
}

} // namespace smelt
