// Greedy arena placement (ArenaPlacement.h) without looking at every placed value.
//
// The greedy rule used to collect, for each value, every placed value live with it, sort them
// by offset and scan for the lowest gap: quadratic, and not only for looking at every placed
// value. On the char LSTM's training step unrolled over 1,024 steps some 7,000 forward
// activations live across the turn to the backward pass, all at once, so each is live with
// thousands of placed values: 3.4 s of a 7 s compile. But a value needs only the union of the
// arena ranges the placed values live with it take, and that is mostly a few runs.
//
// So the placed values are kept as unions of arena ranges (touching ranges joined) on the nodes
// of a segment tree over the steps. A value live over steps [first, last] covers O(log steps)
// canonical nodes (nodes whose steps all lie in the span, under a parent's that do not); its
// range goes into `covering` and `within` of each of them, and into `within` of each node
// above them (those hold steps inside and outside the span: at most two a level). The placed
// values live with a value are then those in `within` of its canonical nodes (placed over
// steps inside them) and in `covering` of the nodes above them (placed over all their steps).
// Its offset is the lowest clear of those O(log steps) unions: lowestFree moves a window up
// past the ranges that meet it, looking again only at the unions that may still meet it.
//
// That is the old scan's answer exactly. The scan, over the taken ranges [b, e) sorted, moving
// the offset y to alignUp(e) past each with b < y + bytes, finds the lowest aligned y that no
// taken range has b < y + bytes and alignUp(e) > y (it never moves past such a y: a range it
// moves past has alignUp(e) <= y there; and where it stops, y is such a y). In units of the
// alignment, each placed value takes [b, b + ceil(its bytes / alignment)) and a value needs
// ceil(bytes / alignment) units clear: the question the unions answer. A value of 0 bytes is
// placed last (the largest go first), at 0, where the scan puts it; empty, it stops no other.
#include "passes/ArenaPlacement.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace smelt {

namespace {

/// Disjoint ranges [begin, end) of arena units, sorted, adjacent ones joined.
class RangeUnion {
public:
  void insert(int64_t begin, int64_t end) {
    // The ranges from the first that ends at or after `begin` to the last that begins at or
    // before `end` touch it: they become one.
    auto first = llvm::partition_point(ranges_, [&](const Range &r) { return r.end < begin; });
    auto last = first;
    for (; last != ranges_.end() && last->begin <= end; ++last) {
      begin = std::min(begin, last->begin);
      end = std::max(end, last->end);
    }
    if (first == last) {
      ranges_.insert(first, {begin, end});
      return;
    }
    *first = {begin, end};
    ranges_.erase(first + 1, last);
  }

  struct Range {
    int64_t begin, end;
  };
  size_t size() const { return ranges_.size(); }
  const Range &operator[](size_t index) const { return ranges_[index]; }

  /// The index of the first range that ends after `unit` (the ranges are disjoint and sorted,
  /// so their ends are too); size() if none does.
  size_t firstEndingAfter(int64_t unit) const {
    return llvm::partition_point(ranges_, [&](const Range &r) { return r.end <= unit; }) -
           ranges_.begin();
  }

private:
  std::vector<Range> ranges_;
};

/// The arena units the placed values take, by the steps they are live at (the file comment
/// says how).
class PlacedValues {
public:
  explicit PlacedValues(int64_t steps) {
    while (leaves_ < steps)
      leaves_ *= 2;
    covering_.resize(2 * leaves_);
    within_.resize(2 * leaves_);
  }

  /// Records arena units [begin, end) as taken over steps [first, last]; counts the unions
  /// updated in `work`.
  void place(int64_t first, int64_t last, int64_t begin, int64_t end, uint64_t &work) {
    forEachCanonical(first, last, [&](unsigned node) {
      covering_[node].insert(begin, end);
      within_[node].insert(begin, end);
      work += 2;
    });
    forEachAbove(first, last, [&](unsigned node) {
      within_[node].insert(begin, end);
      work++;
    });
  }

  /// The lowest unit y such that [y, y + units) is free over steps [first, last]; counts the
  /// unions searched in `work`.
  int64_t lowestFree(int64_t first, int64_t last, int64_t units, uint64_t &work) const {
    // The window [y, y + units) moves up past each range that meets it, until none does. Each
    // union waits in a heap under the beginning of its first range that ends after y, the
    // lowest first; as y only grows, a key found earlier is at most that, so the window is
    // free once the lowest key is at or above its end, and only unions whose ranges may meet
    // it are looked at again.
    struct Next {
      int64_t begin;
      const RangeUnion *ranges;
    };
    llvm::SmallVector<Next, 64> heap;
    auto add = [&](const RangeUnion &ranges) {
      if (ranges.size() > 0)
        heap.push_back({ranges[0].begin, &ranges});
    };
    forEachCanonical(first, last, [&](unsigned node) { add(within_[node]); });
    forEachAbove(first, last, [&](unsigned node) { add(covering_[node]); });
    auto later = [](const Next &a, const Next &b) { return a.begin > b.begin; };
    std::make_heap(heap.begin(), heap.end(), later);
    int64_t y = 0;
    while (!heap.empty() && heap.front().begin < y + units) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const RangeUnion &ranges = *heap.back().ranges;
      heap.pop_back();
      work++;
      size_t index = ranges.firstEndingAfter(y);
      if (index < ranges.size() && ranges[index].begin < y + units)
        y = ranges[index++].end; // it meets the window
      if (index < ranges.size()) {
        heap.push_back({ranges[index].begin, &ranges});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
    return y;
  }

private:
  /// Calls `fn` on each canonical node of steps [first, last].
  template <typename Fn> void forEachCanonical(int64_t first, int64_t last, Fn fn) const {
    for (unsigned lo = leaves_ + unsigned(first), hi = leaves_ + unsigned(last) + 1; lo < hi;
         lo /= 2, hi /= 2) {
      if (lo & 1)
        fn(lo++);
      if (hi & 1)
        fn(--hi);
    }
  }

  /// Calls `fn` on each node above a canonical node of steps [first, last]: the nodes that
  /// hold steps inside and outside the span, at most two a level, one with the steps just
  /// before or at `first` and one with those at or just after `last`.
  template <typename Fn> void forEachAbove(int64_t first, int64_t last, Fn fn) const {
    unsigned lo = leaves_ + unsigned(first), hi = leaves_ + unsigned(last) + 1;
    for (unsigned level = 1; (leaves_ >> level) >= 1; ++level) {
      bool loInside = (lo >> level << level) == lo, hiInside = (hi >> level << level) == hi;
      if (!loInside)
        fn(lo >> level);
      if (!hiInside && (loInside || (hi - 1) >> level != lo >> level))
        fn((hi - 1) >> level);
    }
  }

  unsigned leaves_ = 1;
  std::vector<RangeUnion> covering_, within_;
};

} // namespace

ArenaLayout placeInArena(llvm::ArrayRef<LiveValue> values, int64_t alignment) {
  ArenaLayout layout;
  layout.offsets.assign(values.size(), 0);
  std::vector<unsigned> order(values.size());
  std::iota(order.begin(), order.end(), 0u);
  llvm::stable_sort(order, [&](unsigned a, unsigned b) {
    return values[a].bytes != values[b].bytes ? values[a].bytes > values[b].bytes
                                              : values[a].first < values[b].first;
  });
  int64_t steps = 0;
  for (const LiveValue &value : values) {
    assert(0 <= value.first && value.first <= value.last && value.bytes >= 0);
    steps = std::max(steps, value.last + 1);
  }
  PlacedValues placed(steps);
  for (unsigned index : order) {
    const LiveValue &value = values[index];
    if (value.bytes == 0)
      continue; // at offset 0
    int64_t units = (value.bytes + alignment - 1) / alignment;
    int64_t unit = placed.lowestFree(value.first, value.last, units, layout.work);
    placed.place(value.first, value.last, unit, unit + units, layout.work);
    layout.offsets[index] = unit * alignment;
    layout.extent = std::max(layout.extent, unit * alignment + value.bytes);
  }
  return layout;
}

} // namespace smelt
