// Executables and extras that exercise every field of the AOT artifact format, shared by the
// artifact tests that round-trip them (ArtifactTest.cpp) and those that damage their bytes
// (ArtifactDamageTest.cpp).
#pragma once

#include "runtime/Artifact.h"
#include "runtime/HostTensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smelt::rt::test {

/// A tensor's bytes.
std::vector<uint8_t> bytesOf(const HostTensor &t);
/// `n` random bytes.
std::vector<uint8_t> randomBytes(size_t n);
/// A random constant for buffer `id` of `exe`, of its type.
Constant randomConstant(const Executable &exe, BufferId id);
/// Data to round-trip, not a program: buffers of every dtype and rank 0..3 (one with a zero
/// dimension), constants of every dtype, steps with every attribute kind at its edges,
/// multi-result fusion steps and their kernels, and CUDA code with random CUBIN bytes.
Executable everything();
/// Extras for `exe` and `target`: random bytes as its CPU object, a symbol per kernel.
ArtifactExtras extrasFor(const Executable &exe, const std::string &target);

} // namespace smelt::rt::test
