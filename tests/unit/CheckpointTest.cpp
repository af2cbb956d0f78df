// Training checkpoints (train/Checkpoint.h): every metadata field checked, the tensors' CRC32
// verified, so that a damaged or hand-edited file is an error naming the file and the field,
// never an exception, a hang or a silent resume.
#include "TestUtil.h"

#include "data/Safetensors.h"
#include "train/Checkpoint.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

namespace smelt::test {
namespace {

class Checkpoint : public ::testing::Test {
protected:
  void SetUp() override {
    path = (std::filesystem::temp_directory_path() /
            ("smelt-checkpoint-" + std::to_string(::getpid()) + ".safetensors"))
               .string();
    info = {"mlp", "f32", /*epochsDone=*/2, /*globalStep=*/28, /*batch=*/128, /*seed=*/7};
    ASSERT_TRUE(train::saveCheckpoint(path,
                                      {{"w", randomTensor({3, 4}, DType::f32)},
                                       {"step", randomTensor({}, DType::f32)}},
                                      info)
                    .ok());
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  void TearDown() override { std::filesystem::remove_all(path); }

  /// The error of loading `contents` from the checkpoint's path: it must name the file.
  std::string loadError(const std::string &contents) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
    rt::Expected<train::LoadedCheckpoint> r = train::loadCheckpoint(path);
    if (r.ok())
      return "accepted";
    EXPECT_EQ(r.message().rfind(path + ": ", 0), 0u) << r.message();
    return r.message();
  }

  /// The checkpoint with metadata `key` set to `value` (rewritten, so the CRC stays valid).
  std::string withMetadata(const std::string &key, const std::string &value) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; // the saved original
    rt::Expected<data::Checkpoint> c = data::readSafetensors(path);
    EXPECT_TRUE(c.ok());
    c->metadata[key] = value;
    std::string other = path + ".edited";
    EXPECT_TRUE(data::writeSafetensors(other, *c).ok());
    std::ifstream in(other, std::ios::binary);
    std::string edited((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::filesystem::remove(other);
    return edited;
  }

  std::string path, bytes;
  train::CheckpointInfo info;
};

TEST_F(Checkpoint, RoundTripsItsInfoAndTensors) {
  rt::Expected<train::LoadedCheckpoint> back = train::loadCheckpoint(path);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->info.model, "mlp");
  EXPECT_EQ(back->info.precision, "f32");
  EXPECT_EQ(back->info.epochsDone, 2);
  EXPECT_EQ(back->info.globalStep, 28);
  EXPECT_EQ(back->info.batch, 128);
  EXPECT_EQ(back->info.seed, 7u);
  ASSERT_EQ(back->tensors.size(), 2u);
  EXPECT_EQ(back->tensors[0].name, "w");
}

TEST_F(Checkpoint, NumbersMustBePlainDecimalsInRange) {
  // std::stoll threw on the first two, took "0x10" as 0, and INT64_MIN epochs never ended.
  for (const char *value : {"abc", "99999999999999999999", "-5", "0x10", "-9223372036854775808",
                            "", " 5", "5 ", "+5", "1e3", "007", "9223372036854775808"})
    for (const char *key : {"epochs_done", "global_step", "batch", "seed"}) {
      if (std::string(key) == "seed" && std::string(value) == "9223372036854775808")
        continue; // seeds are unsigned 64-bit
      std::string message = loadError(withMetadata(key, value));
      EXPECT_NE(message.find(std::string("checkpoint metadata '") + key + "' is '" + value +
                             "': not a decimal integer"),
                std::string::npos)
          << key << "=" << value << ": " << message;
    }
  EXPECT_NE(loadError(withMetadata("batch", "0")).find("'batch' is '0'"), std::string::npos);
  EXPECT_NE(loadError(withMetadata("precision", "f8")).find("'precision' is 'f8'"),
            std::string::npos);
  EXPECT_NE(loadError(withMetadata("format", "smelt-checkpoint-1")).find("without a checksum"),
            std::string::npos);
}

TEST_F(Checkpoint, AJsonNumberInTheMetadataIsNotSkipped) {
  // Was skipped, so the field read as missing, i.e. 0 epochs done.
  std::string edited = bytes;
  size_t at = edited.find("\"epochs_done\":\"2\"");
  ASSERT_NE(at, std::string::npos);
  edited.replace(at, 17, "\"epochs_done\":2  "); // same length: the header stays valid
  std::string message = loadError(edited);
  EXPECT_NE(message.find("__metadata__ 'epochs_done' is 2, not a string"), std::string::npos)
      << message;
}

TEST_F(Checkpoint, DamagedFilesAreRefused) {
  // A header length one short: the JSON still parses and every tensor reads one byte off.
  std::string shortHeader = bytes;
  --shortHeader[0];
  EXPECT_NE(loadError(shortHeader).find("the tensors hold"), std::string::npos);
  // One flipped bit in the last tensor byte: only the checksum sees it.
  std::string flipped = bytes;
  flipped.back() ^= 0x10;
  std::string message = loadError(flipped);
  EXPECT_NE(message.find("checkpoint metadata 'tensors_crc32'"), std::string::npos) << message;
  EXPECT_NE(message.find("the file is damaged"), std::string::npos) << message;
  // Without its checksum a checkpoint is not trusted either.
  rt::Expected<data::Checkpoint> c = data::readSafetensors(path);
  ASSERT_TRUE(c.ok());
  c->metadata.erase("tensors_crc32");
  ASSERT_TRUE(data::writeSafetensors(path, *c).ok());
  rt::Expected<train::LoadedCheckpoint> r = train::loadCheckpoint(path);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("'tensors_crc32' is missing"), std::string::npos) << r.message();
}

/// A safetensors file of `header` and `data`.
std::string safetensorsFile(const std::string &header, const std::string &data = "") {
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i)
    file[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
  return file + header + data;
}

TEST_F(Checkpoint, HeadersOutsideTheFormatAreRefusedBeforeParsing) {
  // 100,000 nested lists (in a shape, in the metadata) overflowed the stack when the message
  // printed them; the header nests at most 3 deep.
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  for (const std::string &header :
       {"{\"w\":{\"dtype\":\"F32\",\"shape\":" + deep + ",\"data_offsets\":[0,0]}}",
        "{\"__metadata__\":{\"format\":" + deep + "}}"}) {
    std::string message = loadError(safetensorsFile(header));
    EXPECT_NE(message.find("the header nests deeper than 3 levels at byte offset"),
              std::string::npos)
        << message.substr(0, 300);
  }
  // The format's header starts with '{': not a byte-order mark or a space.
  std::string tensor = "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  for (const std::string &prefix : {std::string("\xef\xbb\xbf"), std::string(" ")})
    EXPECT_NE(loadError(safetensorsFile(prefix + tensor, std::string(4, '\0')))
                  .find("the header at offset 8 does not start with '{'"),
              std::string::npos);
  // Brackets inside strings are no nesting.
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      << safetensorsFile("{\"__metadata__\":{\"note\":\"[[[{{\\\"\"},\"w[\":{\"dtype\":\"F32\","
                         "\"shape\":[1],\"data_offsets\":[0,4]}}",
                         std::string(4, '\0'));
  rt::Expected<data::Checkpoint> read = data::readSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.message();
  EXPECT_EQ(read->metadata["note"], "[[[{{\"");
  EXPECT_EQ(read->tensors.at(0).name, "w[");
}

TEST_F(Checkpoint, ManyTensorsReadInTheirDataOrder) {
  // 20,000 tensors, named out of their data order: each comes back with its own bytes.
  std::string header = "{", data;
  constexpr int kCount = 20000;
  for (int i = 0; i < kCount; ++i) {
    int slot = (i * 7919) % kCount; // a permutation: 7919 is prime and does not divide kCount
    // Appended rather than "," + ...: GCC 12 warns (-Wrestrict, a false positive) there.
    header.append(i ? "," : "")
        .append(fmt::format("\"t{}\":{{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[{},{}]}}",
                            i, 4 * slot, 4 * slot + 4));
  }
  header += "}";
  std::vector<int32_t> values(kCount);
  for (int i = 0; i < kCount; ++i)
    values[size_t((i * 7919) % kCount)] = i;
  data.assign(reinterpret_cast<const char *>(values.data()), values.size() * 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << safetensorsFile(header, data);
  rt::Expected<data::Checkpoint> read = data::readSafetensors(path);
  ASSERT_TRUE(read.ok()) << read.message();
  ASSERT_EQ(read->tensors.size(), size_t(kCount));
  for (const data::NamedTensor &t : read->tensors)
    ASSERT_EQ("t" + std::to_string(t.tensor.data<int32_t>()[0]), t.name);
}

TEST_F(Checkpoint, ADirectoryIsAnErrorNamingIt) {
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  rt::Expected<train::LoadedCheckpoint> r = train::loadCheckpoint(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), path + ": is a directory, not a regular file");
  EXPECT_FALSE(train::saveCheckpoint(path, {}, info).ok());
}

} // namespace
} // namespace smelt::test
