// Philox4x32-10, the counter-based generator of the rng steps (docs/ops.md); exposed for tests.
#pragma once

#include <array>
#include <cstdint>

namespace smelt::rt::cpu {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

} // namespace smelt::rt::cpu
