// Fused kernels on the CPU: a step "fusion" runs one entry of the Executable's JIT-compiled CPU
// code (Executable::cpu) over all its units, split over the threads when it is large.
#pragma once

#include "runtime/Executable.h"
#include "runtime/Status.h"

#include <functional>

namespace smelt::rt::cpu {

/// Runs a fusion step on its buffers' addresses: operands, then results.
using FusedRunner = std::function<void(void *const *buffers)>;

/// Checks `step` (op "fusion") against the kernel it names: the kernel exists, has CPU code,
/// and takes as many operands and results, of as many elements, as the step passes. Errors
/// name the step and the kernel.
Expected<FusedRunner> prepareFused(const Executable &exe, const Step &step);

} // namespace smelt::rt::cpu
