// Philox4x32-10 and the uniform / normal draws built on it (docs/ops.md); exposed for tests.
#pragma once

#include <array>
#include <cstdint>

namespace smelt::rt::cpu {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
/// The uniform [0, 1) draw of element `index` at counter `offset`; `wide` uses 53 bits (f64).
double uniformAt(uint64_t index, uint64_t seed, uint64_t offset, bool wide);
/// The standard normal draw of element `index` (Box-Muller); `wide` computes in double.
double normalAt(uint64_t index, uint64_t seed, uint64_t offset, bool wide);

} // namespace smelt::rt::cpu
