// SHA-256 against the FIPS 180-2 known answers, and readArtifact's pin: the right hash (either
// case) loads, any other or a malformed one is refused before the file is decoded.
#include "runtime/Artifact.h"
#include "runtime/ContentHash.h"
#include "runtime/FileIO.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

namespace smelt::rt::test {
namespace {

std::vector<uint8_t> bytesOf(const std::string &text) { return {text.begin(), text.end()}; }

TEST(ContentHash, Sha256MatchesTheStandardsKnownAnswers) {
  EXPECT_EQ(sha256Hex({}), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256Hex(bytesOf("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256Hex(bytesOf("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256Hex(std::vector<uint8_t>(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// A file written in pieces hashes as the bytes one after another, wherever the cuts fall.
TEST(ContentHash, Sha256OfPartsIsTheSha256OfTheirBytes) {
  std::vector<uint8_t> text = bytesOf("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq");
  std::span<const uint8_t> all(text);
  for (size_t cut : {size_t(0), size_t(1), size_t(55), text.size()}) {
    std::vector<std::span<const uint8_t>> parts = {all.first(cut), {}, all.subspan(cut)};
    EXPECT_EQ(sha256HexOfParts(parts),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        << "cut at " << cut;
  }
  EXPECT_EQ(sha256HexOfParts({}), sha256Hex({}));
}

TEST(ContentHash, ReadArtifactLoadsOnlyThePinnedFile) {
  std::string path = (std::filesystem::temp_directory_path() /
                      ("smelt-pin-" + std::to_string(::getpid()) + ".smelt"))
                         .string();
  Executable exe;
  exe.name = "pinned";
  exe.buffers.push_back({{DType::f32, {3}}, "%x"});
  exe.inputs = {0};
  exe.outputs = {0};
  ASSERT_TRUE(writeArtifact(path, exe, {{}, {}, "cpu", "ContentHashTest"}).ok());
  Expected<std::vector<uint8_t>> bytes = readFileBytes(path);
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  std::string hash = sha256Hex(*bytes), upper = hash;
  for (char &c : upper)
    c = char(std::toupper(static_cast<unsigned char>(c)));

  EXPECT_TRUE(readArtifact(path, {.expectedSha256 = hash}).ok());
  EXPECT_TRUE(readArtifact(path, {.expectedSha256 = upper}).ok());
  std::string other = hash;
  other[0] = other[0] == '0' ? '1' : '0';
  Expected<LoadedArtifact> wrong = readArtifact(path, {.expectedSha256 = other});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.message(), path + ": its SHA-256 is " + hash + ", not the expected " + other +
                                 "; refusing to load it (an artifact is native code: load only "
                                 "the file you pinned)");
  for (std::string bad : {std::string("abc"), hash + "0", "g" + hash.substr(1)}) {
    Expected<LoadedArtifact> malformed = readArtifact(path, {.expectedSha256 = bad});
    ASSERT_FALSE(malformed.ok()) << bad;
    EXPECT_EQ(malformed.message(), "the expected SHA-256 '" + bad + "' is not 64 hex digits");
  }
  std::filesystem::remove(path);
}

} // namespace
} // namespace smelt::rt::test
