// Damaged AOT artifacts: truncated, corrupt, foreign or newer files, counts that claim huge
// sizes and edits that keep every checksum valid are rejected with a message naming the file,
// the part and the byte, never a crash.
#include "ArtifactEdit.h"
#include "ArtifactSamples.h"
#include "RuntimeTestUtil.h"

#include "runtime/Artifact.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

namespace smelt::rt::test {
namespace {

using Bytes = std::vector<uint8_t>;

/// A valid artifact with every section, as bytes.
Bytes validArtifact() {
  Executable exe = everything();
  Expected<Bytes> bytes = encodeArtifact(exe, extrasFor(exe, "cuda:sm_90"));
  EXPECT_TRUE(bytes.ok()) << bytes.message();
  return bytes.ok() ? *bytes : Bytes();
}

/// The reader's error for `bytes`, which it must reject, read as file "bad.smelt".
std::string readError(const Bytes &bytes) {
  Expected<LoadedArtifact> loaded = decodeArtifact(bytes, "bad.smelt");
  EXPECT_FALSE(loaded.ok()) << "a damaged artifact was accepted";
  return loaded.ok() ? "" : loaded.message();
}

bool startsWith(const std::string &s, const std::string &prefix) { return s.rfind(prefix, 0) == 0; }

TEST(Artifact, EveryTruncationIsRejected) {
  Bytes bytes = validArtifact();
  for (size_t size = 0; size < bytes.size(); ++size) {
    std::string message = readError(Bytes(bytes.begin(), bytes.begin() + std::ptrdiff_t(size)));
    ASSERT_TRUE(startsWith(message, fmt::format("bad.smelt: header, byte {}: truncated: the "
                                                "file has {} bytes",
                                                size, size)))
        << message;
  }
}

TEST(Artifact, EveryFlippedByteIsRejectedNamingItsPart) {
  Bytes bytes = validArtifact();
  auto sections = sectionsOf(bytes);
  ASSERT_EQ(sections.size(), 5u);
  size_t tableEnd = kHeaderBytes + kEntryBytes * sections.size();
  // The part a flip of byte i is reported in: header, a section (at its first byte), padding.
  auto expectedPrefix = [&](size_t i) {
    if (i < tableEnd)
      return std::string("bad.smelt: header, byte ");
    for (const auto &[kind, s] : sections)
      if (i >= s.offset && i < s.offset + s.size) {
        const char *names[] = {"", "meta", "plan", "constants", "cuda", "cpu"};
        return fmt::format("bad.smelt: {} section, byte {}: ", names[kind], s.offset);
      }
    return fmt::format("bad.smelt: padding, byte {}: ", i);
  };
  for (size_t i = 0; i < bytes.size(); ++i) {
    Bytes damaged = bytes;
    damaged[i] ^= uint8_t(1 + rng()() % 255);
    std::string message = readError(damaged);
    ASSERT_TRUE(startsWith(message, expectedPrefix(i))) << "byte " << i << ": " << message;
  }
}

TEST(Artifact, ForeignFilesAndOtherVersionsSaySo) {
  Bytes bytes = validArtifact();
  Bytes elf = bytes;
  std::memcpy(elf.data(),
              "\x7f"
              "ELF\x02\x01\x01\x00",
              8);
  EXPECT_EQ(readError(elf), "bad.smelt: header, byte 0: not a Smelt artifact: it starts with "
                            "0x7f454c4602010100 instead of the magic \"SMELTAOT\"");
  EXPECT_TRUE(startsWith(readError(Bytes{'{', '}'}), "bad.smelt: header, byte 0: not a Smelt"));

  Bytes newer = bytes;
  storeLE(newer, 8, kArtifactVersion + 1, 4);
  reseal(newer);
  EXPECT_EQ(readError(newer), fmt::format("bad.smelt: header, byte 8: the file has artifact "
                                          "format version {}; this runtime reads version {} "
                                          "(compile the model again with a matching smelt)",
                                          kArtifactVersion + 1, kArtifactVersion));
  // A file of the previous format (no filter layout in a convolution's parameters) is told
  // apart before anything else in it is read.
  Bytes older = bytes;
  storeLE(older, 8, 12, 4);
  reseal(older);
  EXPECT_EQ(readError(older), "bad.smelt: header, byte 8: the file has artifact format version "
                              "12; this runtime reads version 13 (compile the model again with a "
                              "matching smelt)");
  Bytes flagged = bytes;
  storeLE(flagged, 12, 0x4, 4);
  reseal(flagged);
  EXPECT_TRUE(startsWith(readError(flagged), "bad.smelt: header, byte 12: flags 0x4"));
  Bytes longer = bytes;
  longer.push_back(0);
  EXPECT_TRUE(startsWith(readError(longer), "bad.smelt: header, byte 24: the file has"));
}

/// Overwrites `width` bytes at `at` with `value`, fixes the checksums and returns the error.
std::string errorAfterPatch(Bytes bytes, size_t at, uint64_t value, int width) {
  storeLE(bytes, at, value, width);
  reseal(bytes);
  return readError(bytes);
}

TEST(Artifact, CountsClaimingHugeSizesFailBeforeAllocating) {
  Executable exe = everything();
  ArtifactExtras extras = extrasFor(exe, "cuda:sm_90");
  Expected<Bytes> encoded = encodeArtifact(exe, extras);
  ASSERT_TRUE(encoded.ok()) << encoded.message();
  const Bytes &bytes = *encoded;
  size_t plan = findSection(bytes, kPlan)->offset, cuda = findSection(bytes, kCuda)->offset;
  size_t cpu = findSection(bytes, kCpu)->offset;
  size_t buffers = plan + 4 + exe.name.size(); // after the name
  struct Case {
    size_t at;
    uint64_t value;
    int width;
    std::string part, what;
  };
  size_t cubin = cuda + 12 + exe.cuda->arch.size() + exe.cuda->source.size() + exe.cuda->ptx.size();
  size_t object = cpu + 4 + 4 * extras.cpuSymbols.size();
  for (const std::string &s : extras.cpuSymbols)
    object += s.size();
  const uint64_t huge = uint64_t(1) << 63;
  for (const Case &c : std::vector<Case>{
           {plan, 0xffffffff, 4, "plan section", "the executable's name needs 4294967295 bytes"},
           {buffers, 0xffffffff, 4, "plan section", "the buffer list claims 4294967295 entries"},
           {buffers + 5, 0xfffffff0, 4, "plan section", "a shape claims 4294967280 entries"},
           {cubin, huge, 8, "cuda section", "the CUBIN claims 9223372036854775808 bytes"},
           {object, huge, 8, "cpu section", "the CPU shared library claims"},
           {cpu, 0x7fffffff, 4, "cpu section", "the CPU symbol list claims 2147483647 entries"},
           // A section table entry whose size runs past the end of the file.
           {kHeaderBytes + kEntryBytes * 2 + 16, huge, 8, "section table",
            "has 9223372036854775808 bytes"},
       }) {
    std::string message = errorAfterPatch(bytes, c.at, c.value, c.width);
    EXPECT_TRUE(startsWith(message, "bad.smelt: " + c.part + ", byte "))
        << "patch at " << c.at << ": " << message;
    EXPECT_NE(message.find(c.what), std::string::npos) << "patch at " << c.at << ": " << message;
  }
  // The dtype of buffer 0 and the error's byte: the one patched.
  EXPECT_EQ(errorAfterPatch(bytes, buffers + 4, 9, 1),
            fmt::format("bad.smelt: plan section, byte {}: buffer b0 has dtype code 9 (known: "
                        "0..6, f32 to i1)",
                        buffers + 4));
}

TEST(Artifact, UnknownStepOpsBadFlagsAndNonzeroPaddingAreRejected) {
  Executable exe =
      oneStep("matmul", {{DType::f32, {2, 3}}, {DType::f32, {3, 4}}}, {DType::f32, {2, 4}},
              {{"transpose_lhs", int64_t(1)}});
  exe.steps[0].location = "zz_probe";
  Expected<Bytes> encoded = encodeArtifact(exe, {{}, {}, "cpu", ""});
  ASSERT_TRUE(encoded.ok()) << encoded.message();
  // The step's op byte comes just before its location (a 4-byte length, then the text).
  std::string key = "zz_probe";
  auto found = std::search(encoded->begin(), encoded->end(), key.begin(), key.end());
  ASSERT_NE(found, encoded->end());
  size_t op = size_t(found - encoded->begin()) - 5;
  ASSERT_EQ((*encoded)[op], uint8_t(StepOp::Matmul));
  EXPECT_EQ(errorAfterPatch(*encoded, op, kNumStepOps, 1),
            fmt::format("bad.smelt: plan section, byte {}: step #0 has op #{}; this runtime "
                        "knows ops 0..{}",
                        op, kNumStepOps, kNumStepOps - 1));
  // transpose_lhs, a flag, is the first byte after the step's three buffer-id lists (2, 1 and
  // 0 ids of 4 bytes, each list after a 4-byte count).
  size_t flag = op + 5 + key.size() + 4 + std::string("cpu:0").size() + 4 + 8 + 4 + 4 + 4;
  ASSERT_EQ((*encoded)[flag], 1);
  EXPECT_EQ(errorAfterPatch(*encoded, flag, 2, 1),
            fmt::format("bad.smelt: plan section, byte {}: step #0 ('matmul'): parameter "
                        "'transpose_lhs' is 2, not within 0..1",
                        flag));
  // After transpose_rhs and bias, the activation: an enum of seven values.
  size_t activation = flag + 3;
  ASSERT_EQ((*encoded)[activation], 0);
  EXPECT_EQ(errorAfterPatch(*encoded, activation, 7, 1),
            fmt::format("bad.smelt: plan section, byte {}: step #0 ('matmul'): parameter "
                        "'activation' is 7, not within 0..6",
                        activation));
  Bytes logistic = *encoded;
  storeLE(logistic, activation, uint64_t(Activation::logistic), 1);
  reseal(logistic);
  Expected<LoadedArtifact> read = decodeArtifact(logistic, "logistic.smelt");
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_EQ(read->executable.steps[0].epilogue().activation, Activation::logistic);
  size_t padding = kHeaderBytes + kEntryBytes * sectionsOf(*encoded).size();
  ASSERT_EQ((*encoded)[padding], 0);
  EXPECT_TRUE(startsWith(errorAfterPatch(*encoded, padding, 1, 1),
                         fmt::format("bad.smelt: padding, byte {}: ", padding)));
}

TEST(Artifact, RandomEditsWithValidChecksumsLoadOrFailCleanly) {
  // The fuzzer's job in small: edits the checksums do not catch must still be caught or be
  // harmless. A success must be an artifact that encodes again.
  Bytes bytes = validArtifact();
  auto sections = sectionsOf(bytes);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Bytes damaged = bytes;
    const SectionSpan &s = sections[rng()() % sections.size()].second;
    for (int edits = 1 + int(rng()() % 3); edits > 0; --edits) {
      size_t at = s.offset + rng()() % s.size;
      damaged[at] = (rng()() & 1) ? uint8_t(rng()()) : uint8_t(damaged[at] ^ 0x80);
    }
    reseal(damaged);
    Expected<LoadedArtifact> loaded = decodeArtifact(damaged, "bad.smelt");
    if (!loaded.ok()) {
      ASSERT_TRUE(startsWith(loaded.message(), "bad.smelt: ")) << loaded.message();
      continue;
    }
    ++accepted;
    Expected<Bytes> again = encodeArtifact(loaded->executable, loaded->extras);
    ASSERT_TRUE(again.ok()) << again.message();
  }
  std::printf("random edits: %d of 3000 still formed a valid artifact\n", accepted);
}

} // namespace
} // namespace smelt::rt::test

