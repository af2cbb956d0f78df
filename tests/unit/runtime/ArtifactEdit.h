// Byte-level access to AOT artifacts for the tests and the fuzzer: find a section, recompute the
// checksums after an edit. Written from the format as Artifact.h documents it, not from
// Artifact.cpp, so the tests also hold the documentation to the code. No GoogleTest here: the
// fuzzer includes it too.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace smelt::rt::test {

inline constexpr size_t kHeaderBytes = 32, kEntryBytes = 24;
enum SectionKind : uint32_t { kMeta = 1, kPlan, kConstants, kCuda, kCpu };

inline uint64_t loadLE(const std::vector<uint8_t> &b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= uint64_t(b[at + i]) << (8 * i);
  return v;
}
inline void storeLE(std::vector<uint8_t> &b, size_t at, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    b[at + i] = uint8_t(v >> (8 * i));
}

/// Where a section's table entry and payload are.
struct SectionSpan {
  size_t entry, offset, size;
};

/// The table's entries whose payload lies inside the file, in table order. Safe on any bytes.
inline std::vector<std::pair<uint32_t, SectionSpan>> sectionsOf(const std::vector<uint8_t> &b) {
  std::vector<std::pair<uint32_t, SectionSpan>> spans;
  if (b.size() < kHeaderBytes)
    return spans;
  uint64_t count = loadLE(b, 16, 4);
  for (uint64_t i = 0; i < count && kHeaderBytes + kEntryBytes * (i + 1) <= b.size(); ++i) {
    size_t entry = kHeaderBytes + kEntryBytes * i;
    uint64_t offset = loadLE(b, entry + 8, 8), size = loadLE(b, entry + 16, 8);
    if (offset <= b.size() && size <= b.size() - offset)
      spans.push_back({uint32_t(loadLE(b, entry, 4)), {entry, size_t(offset), size_t(size)}});
  }
  return spans;
}

inline std::optional<SectionSpan> findSection(const std::vector<uint8_t> &b, uint32_t kind) {
  for (const auto &[k, span] : sectionsOf(b))
    if (k == kind)
      return span;
  return std::nullopt;
}

/// Makes every checksum match the bytes again after an edit: each payload's CRC in its table
/// entry, then the header's CRC over the header and table (its own field read as zero).
inline void reseal(std::vector<uint8_t> &b) {
  for (const auto &[kind, s] : sectionsOf(b))
    storeLE(b, s.entry + 4, crc32_z(0, b.data() + s.offset, s.size), 4);
  if (b.size() < kHeaderBytes)
    return;
  uint64_t tableEnd = kHeaderBytes + kEntryBytes * loadLE(b, 16, 4);
  if (tableEnd > b.size())
    return;
  storeLE(b, 20, 0, 4);
  storeLE(b, 20, crc32_z(0, b.data(), tableEnd), 4);
}

} // namespace smelt::rt::test
