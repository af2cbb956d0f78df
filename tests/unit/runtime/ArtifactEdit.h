// Byte-level access to AOT artifacts for the tests and the fuzzer: where the plan and the data
// lie, the checksums recomputed after an edit, and the plan edited through flatc's object API.
// The header's layout is written from the format as Artifact.h documents it, not from
// Artifact.cpp, so the tests also hold the documentation to the code. No GoogleTest here: the
// fuzzer includes it too.
#pragma once

#include "runtime/ArtifactPlan_generated.h"

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

namespace smelt::rt::test {

inline constexpr size_t kHeaderBytes = 64;

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

/// Where the plan and the data lie, by the header's sizes.
struct Parts {
  size_t planAt = kHeaderBytes, planSize, dataAt, dataSize;
};

/// The parts when the header is whole and both parts lie inside the file. Safe on any bytes.
inline std::optional<Parts> partsOf(const std::vector<uint8_t> &b) {
  if (b.size() < kHeaderBytes)
    return std::nullopt;
  uint64_t plan = loadLE(b, 16, 8), data = loadLE(b, 24, 8);
  if (plan > b.size() || data > b.size())
    return std::nullopt;
  size_t dataAt = (kHeaderBytes + plan + 63) / 64 * 64;
  if (dataAt + data > b.size())
    return std::nullopt;
  return Parts{kHeaderBytes, size_t(plan), dataAt, size_t(data)};
}

/// Makes every checksum match the bytes again after an edit: the plan's and the data's, then
/// the header's over its bytes 0..40.
inline void reseal(std::vector<uint8_t> &b) {
  if (b.size() < kHeaderBytes)
    return;
  if (std::optional<Parts> p = partsOf(b)) {
    storeLE(b, 32, crc32_z(0, b.data() + p->planAt, p->planSize), 4);
    storeLE(b, 36, crc32_z(0, b.data() + p->dataAt, p->dataSize), 4);
  }
  storeLE(b, 40, crc32_z(0, b.data(), 40), 4);
}

/// An artifact of `file`'s header and data around the FlatBuffer `plan`, resealed.
inline std::vector<uint8_t> withPlan(const std::vector<uint8_t> &file, const uint8_t *plan,
                                     size_t planSize) {
  Parts old = *partsOf(file);
  std::vector<uint8_t> out(file.begin(), file.begin() + kHeaderBytes);
  out.insert(out.end(), plan, plan + planSize);
  out.resize((out.size() + 63) / 64 * 64);
  out.insert(out.end(), file.begin() + std::ptrdiff_t(old.dataAt), file.end());
  storeLE(out, 16, planSize, 8);
  reseal(out);
  return out;
}

/// The plan of a well-formed artifact, unpacked.
inline std::unique_ptr<aot::PlanT> planOf(const std::vector<uint8_t> &file) {
  return aot::UnPackPlan(file.data() + kHeaderBytes);
}

/// `file` with its plan replaced by `edit(plan)`'s result, resealed.
template <typename Edit>
std::vector<uint8_t> editPlan(const std::vector<uint8_t> &file, Edit edit) {
  std::unique_ptr<aot::PlanT> plan = planOf(file);
  edit(*plan);
  flatbuffers::FlatBufferBuilder builder;
  aot::FinishPlanBuffer(builder, aot::Plan::Pack(builder, plan.get()));
  return withPlan(file, builder.GetBufferPointer(), builder.GetSize());
}

} // namespace smelt::rt::test
