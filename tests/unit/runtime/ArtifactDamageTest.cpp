// Damaged AOT artifacts: truncated, corrupt, foreign or newer files, malformed plans, plans
// whose shared parts would materialize far more than the file, fields that do not fit the plan
// and edits that keep every checksum valid are rejected with a message naming the file, the
// part and the byte or the plan's entry, never a crash.
#include "ArtifactEdit.h"
#include "ArtifactSamples.h"
#include "RuntimeTestUtil.h"

#include "runtime/Artifact.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <functional>
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
  std::optional<Parts> parts = partsOf(bytes);
  ASSERT_TRUE(parts);
  // The part a flip of byte i is reported in: the header, the plan or the data (at its first
  // byte, by its checksum), or the padding between them.
  auto expectedPrefix = [&](size_t i) {
    if (i < kHeaderBytes)
      return std::string("bad.smelt: header, byte ");
    if (i < parts->planAt + parts->planSize)
      return fmt::format("bad.smelt: plan, byte {}: ", parts->planAt);
    if (i < parts->dataAt)
      return fmt::format("bad.smelt: padding, byte {}: ", i);
    return fmt::format("bad.smelt: data, byte {}: ", parts->dataAt);
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
  // A file of the previous format (sections of hand-encoded bytes, no FlatBuffers plan) is told
  // apart before anything else in it is read.
  Bytes older = bytes;
  storeLE(older, 8, 13, 4);
  reseal(older);
  EXPECT_EQ(readError(older), "bad.smelt: header, byte 8: the file has artifact format version "
                              "13; this runtime reads version 14 (compile the model again with a "
                              "matching smelt)");
  Bytes flagged = bytes;
  storeLE(flagged, 12, 0x4, 4);
  reseal(flagged);
  EXPECT_TRUE(startsWith(readError(flagged), "bad.smelt: header, byte 12: flags 0x4"));
  Bytes reserved = bytes;
  reserved[50] = 1;
  EXPECT_EQ(readError(reserved), "bad.smelt: header, byte 50: reserved byte 0x01 should be zero");
  Bytes longer = bytes;
  longer.push_back(0);
  EXPECT_TRUE(startsWith(readError(longer), "bad.smelt: header, byte 24: the file has"));
}

TEST(Artifact, MalformedPlansAndSizesFailBeforeAllocating) {
  Bytes bytes = validArtifact();
  Parts parts = *partsOf(bytes);
  // Sizes in the header beyond the file.
  Bytes huge = bytes;
  storeLE(huge, 24, uint64_t(1) << 63, 8);
  reseal(huge);
  EXPECT_TRUE(startsWith(readError(huge), "bad.smelt: header, byte "));
  EXPECT_NE(readError(huge).find("truncated"), std::string::npos) << readError(huge);
  // The plan's root offset pointing outside it: FlatBuffers' verifier refuses the plan.
  Bytes rootless = bytes;
  storeLE(rootless, parts.planAt, 0xfffffff0, 4);
  reseal(rootless);
  EXPECT_EQ(readError(rootless),
            fmt::format("bad.smelt: plan, byte 64: the {} bytes are not a plan of "
                        "runtime/ArtifactPlan.fbs (FlatBuffers' verifier refuses them)",
                        parts.planSize));
  // A well-formed plan whose 20,000 buffers share one type of 20,000 dimensions: 3.2 GB as an
  // Executable from a plan of 240 KB. The reader counts what it materializes against the plan.
  flatbuffers::FlatBufferBuilder builder;
  auto type = aot::CreateType(builder, aot::DType::f32,
                              builder.CreateVector(std::vector<int64_t>(20000, 1)));
  auto buffer = aot::CreateBuffer(builder, type);
  std::vector<flatbuffers::Offset<aot::Buffer>> shared(20000, buffer);
  aot::PlanBuilder plan(builder);
  auto target = builder.CreateString("cpu");
  auto buffers = builder.CreateVector(shared);
  plan.add_target(target);
  plan.add_buffers(buffers);
  aot::FinishPlanBuffer(builder, plan.Finish());
  EXPECT_TRUE(startsWith(
      readError(withPlan(bytes, builder.GetBufferPointer(), builder.GetSize())),
      fmt::format("bad.smelt: plan: its entries refer to more than its {} bytes (parts are "
                  "shared)",
                  builder.GetSize())));
}

TEST(Artifact, PlanFieldsAreCheckedAgainstThePlanAroundThem) {
  Executable exe = oneStep("matmul", {{DType::f32, {2, 3}}, {DType::f32, {3, 4}}},
                           {DType::f32, {2, 4}}, {{"transpose_lhs", int64_t(1)}});
  exe.constants.push_back(randomConstant(exe, 1));
  Expected<Bytes> encoded = encodeArtifact(exe, {{}, {}, "cpu", ""});
  ASSERT_TRUE(encoded.ok()) << encoded.message();
  /// The matmul's parameter `name`.
  auto param = [](aot::PlanT &plan, const std::string &name) -> aot::ParamT & {
    for (auto &p : plan.steps[0]->params)
      if (p->name == name)
        return *p;
    ADD_FAILURE() << "no parameter " << name;
    return *plan.steps[0]->params[0];
  };
  struct Case {
    std::function<void(aot::PlanT &)> edit;
    std::string error;
  };
  for (const Case &c : std::vector<Case>{
           {[](aot::PlanT &p) { p.steps[0]->op = "matmul_v2"; },
            "step #0 has op 'matmul_v2', which this runtime does not know"},
           {[&](aot::PlanT &p) { param(p, "transpose_lhs").integer = 2; },
            "step #0 ('matmul'): parameter 'transpose_lhs' is 2, not within 0..1"},
           {[&](aot::PlanT &p) { param(p, "activation").integer = 7; },
            "step #0 ('matmul'): parameter 'activation' is 7, not within 0..6"},
           {[&](aot::PlanT &p) { param(p, "activation").name = "alpha"; },
            "step #0 ('matmul'): parameter 'alpha' is not one this runtime knows (a newer smelt "
            "wrote the file?)"},
           {[&](aot::PlanT &p) { param(p, "bias").name = "activation"; },
            "step #0 ('matmul'): parameter 'activation' appears twice"},
           {[](aot::PlanT &p) { p.buffers[0]->type->dtype = aot::DType(9); },
            "buffer b0 has dtype code 9 (known: 0..6, f32 to i1)"},
           {[](aot::PlanT &p) {
              p.buffers[2]->type->shape = {2, -4};
            },
            "buffer b2 has shape [2, -4], which is negative or too large"},
           {[](aot::PlanT &p) { p.steps[0]->operands[1] = 3; },
            "step #0 ('matmul') operand #1: buffer id 3 is out of range (the plan has 3 "
            "buffers)"},
           {[](aot::PlanT &p) { p.steps[0]->device = "tpu:0"; },
            "step #0 ('matmul'): device 'tpu:0' is not cpu:0 or gpu:<N>"},
           {[](aot::PlanT &p) { p.constants[0]->bytes = std::make_unique<aot::Range>(64, 48); },
            "constant #0 has 48 bytes at offset 64, which is not a 64-byte aligned range inside "
            "the data part's 48 bytes"},
           {[](aot::PlanT &p) { p.constants[0]->bytes = std::make_unique<aot::Range>(0, 44); },
            "constant #0 (b1, tensor<3x4xf32>) has 44 bytes, its type needs 48"},
           {[](aot::PlanT &p) { p.target = "tpu"; },
            "target 'tpu' is neither \"cpu\" nor \"cuda:<arch>\""},
       }) {
    EXPECT_EQ(readError(editPlan(*encoded, c.edit)), "bad.smelt: plan: " + c.error);
  }
  // A field the file lacks, as in a file written before the field existed, takes its default;
  // a valid value of another is read as written.
  Bytes older = editPlan(*encoded, [](aot::PlanT &p) {
    auto &params = p.steps[0]->params;
    std::erase_if(params, [](const auto &q) { return q->name == "transpose_lhs"; });
    for (auto &q : params)
      if (q->name == "activation")
        q->integer = int64_t(Activation::logistic);
  });
  Expected<LoadedArtifact> read = decodeArtifact(older, "older.smelt");
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_FALSE(read->executable.steps[0].paramsAs<MatmulParams>()->transposeLhs);
  EXPECT_EQ(read->executable.steps[0].epilogue().activation, Activation::logistic);
}

TEST(Artifact, AFieldANewerWriterAddsIsSkipped) {
  // FlatBuffers' forward compatibility: a table field this reader's schema does not have (one a
  // newer smelt adds) is skipped, and the fields it knows read as written.
  flatbuffers::FlatBufferBuilder builder;
  auto target = builder.CreateString("cpu");
  auto name = builder.CreateString("newer");
  auto future = builder.CreateString("a field of a later schema");
  aot::PlanBuilder plan(builder);
  plan.add_target(target);
  plan.add_name(name);
  builder.AddOffset(flatbuffers::FieldIndexToOffset(40), future);
  aot::FinishPlanBuffer(builder, plan.Finish());
  Expected<LoadedArtifact> read = decodeArtifact(
      withPlan(validArtifact(), builder.GetBufferPointer(), builder.GetSize()), "newer.smelt");
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_EQ(read->executable.name, "newer");
  EXPECT_EQ(read->extras.target, "cpu");
}

TEST(Artifact, RandomEditsWithValidChecksumsLoadOrFailCleanly) {
  // The fuzzer's job in small: edits the checksums do not catch must still be caught or be
  // harmless. A success must be an artifact that encodes again.
  Bytes bytes = validArtifact();
  Parts parts = *partsOf(bytes);
  int accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Bytes damaged = bytes;
    // Mostly the plan, where the structure is; the data holds bytes.
    bool plan = trial % 4 != 0;
    size_t begin = plan ? parts.planAt : parts.dataAt;
    size_t size = plan ? parts.planSize : parts.dataSize;
    for (int edits = 1 + int(rng()() % 3); edits > 0; --edits) {
      size_t at = begin + rng()() % size;
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

