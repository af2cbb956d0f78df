// Arena offsets for values with live intervals, for smelt-assign-buffers: XLA's heap simulator,
// greedy (the largest value first, ties the earlier; each at the lowest aligned offset no value
// live at the same time covers). The placed values are kept by live interval as unions of arena
// ranges, so placing a value searches O(log steps) unions (again for each range it moves past),
// not every value placed before it (ArenaPlacement.cpp says how, and why the offsets are the
// same).
#pragma once

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <vector>

namespace smelt {

/// A value in the arena: live from step `first` to step `last` (0 <= first <= last, both
/// included), `bytes` long.
struct LiveValue {
  int64_t first, last, bytes;
};

struct ArenaLayout {
  std::vector<int64_t> offsets; ///< One per value, in the order given.
  int64_t extent = 0;           ///< The arena's length: the furthest end.
  /// The work done, for tests that bound it: the unions of arena ranges searched to place each
  /// value and updated once it is placed (a binary search each).
  uint64_t work = 0;
};

/// Offsets (multiples of `alignment`) for `values` such that two values live at once never
/// share a byte.
ArenaLayout placeInArena(llvm::ArrayRef<LiveValue> values, int64_t alignment);

} // namespace smelt
