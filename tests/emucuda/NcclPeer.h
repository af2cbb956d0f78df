// What NcclTest's cross-process cases and their peer program (NcclPeer.cpp) agree on: the
// inputs each rank contributes (any rank can compute any other's) and how a unique id travels
// on the command line.
#pragma once

#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace smelt::emucuda::nccl_peer {

/// Elements of the cross-process all-reduce: more than one 4 MiB round of the rendezvous.
constexpr size_t kAllReduceCount = 1300000;
constexpr size_t kAllGatherCount = 1000;

/// Rank `rank`'s f32 input at `i`: varied magnitudes and signs, so that the order of the sum
/// shows in the bits.
inline float allReduceInput(int rank, size_t i) {
  uint64_t x = (uint64_t(rank) + 1) * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
  x ^= x >> 31;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 29;
  float unit = float(x >> 40) / float(1 << 24) - 0.5f; // [-0.5, 0.5)
  return unit * float(1 << (x % 16));
}

inline int32_t allGatherInput(int rank, size_t i) { return int32_t(rank * 100000 + i * 3); }

inline std::string idToHex(const ncclUniqueId &id) {
  std::string hex;
  char two[3];
  for (char byte : id.internal) {
    std::snprintf(two, sizeof two, "%02x", unsigned(uint8_t(byte)));
    hex += two;
  }
  return hex;
}

inline bool idFromHex(const std::string &hex, ncclUniqueId &id) {
  if (hex.size() != 2 * sizeof id.internal)
    return false;
  for (size_t i = 0; i < sizeof id.internal; ++i)
    id.internal[i] = char(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  return true;
}

} // namespace smelt::emucuda::nccl_peer
