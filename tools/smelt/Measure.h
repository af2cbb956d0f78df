// What `smelt run --repeat` and `smelt bench` measure with: the median of repeated timings and
// the process's peak resident memory.
#pragma once

#include <cstddef>
#include <vector>

namespace smelt::tools {

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> values);

/// This process's peak resident set in bytes (VmHWM).
size_t peakResidentBytes();

} // namespace smelt::tools
