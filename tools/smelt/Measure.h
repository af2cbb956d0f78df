// What `smelt run --repeat` and `smelt bench` measure with: the median of repeated timings and
// the process's peak resident memory.
#pragma once

#include <cstddef>
#include <vector>

namespace smelt::tools {

/// The median of `values` (the mean of the middle two for an even count); 0 when empty.
double median(std::vector<double> values);

/// This process's peak resident set in bytes (VmHWM), leaving out what leaveOutOfPeak left out.
size_t peakResidentBytes();

/// Leaves out of peakResidentBytes the memory taken and given back since it read `peakBefore`
/// (`smelt bench` measuring the machine's roofline with buffers of its own): the kernel's
/// high-water mark starts over from what is resident now (/proc/self/clear_refs), and
/// `peakBefore` stays the floor. Where the kernel does not allow it, nothing is left out.
void leaveOutOfPeak(size_t peakBefore);

} // namespace smelt::tools
