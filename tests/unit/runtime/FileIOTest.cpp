// The shared file writer, reader and mapper (runtime/FileIO.h): what is not a regular file is
// refused on both sides, failed writes are errors, a mapping keeps its bytes through a rename,
// and temporaries of killed writers are cleaned up.
#include "runtime/FileIO.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace smelt::rt::test {
namespace {

namespace fs = std::filesystem;

/// A fresh, empty directory for one test.
fs::path freshDirectory(const std::string &name) {
  fs::path dir = fs::temp_directory_path() / ("smelt-fileio-" + std::to_string(::getpid()) + "-" +
                                              name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(FileIO, RefusesToReplaceADeviceAFifoOrADirectory) {
  fs::path dir = freshDirectory("replace");
  std::string fifo = (dir / "fifo").string(), sub = (dir / "sub").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  fs::create_directory(sub);
  // /dev/full stands for every device node; only the check runs, nothing is written.
  for (const std::string &path : {fifo, sub, std::string("/dev/full")}) {
    EXPECT_FALSE(checkReplaceable(path).ok()) << path;
    if (path == "/dev/full")
      continue;
    Status s = writeFileAtomically(path, std::vector<uint8_t>{1, 2, 3});
    ASSERT_FALSE(s.ok()) << path;
    EXPECT_EQ(s.message().rfind(path + ": is a", 0), 0u) << s.message();
    EXPECT_NE(s.message().find("refusing to replace it"), std::string::npos) << s.message();
  }
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced by a regular file";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2)
      << "a temporary was left behind";
  fs::remove_all(dir);
}

TEST(FileIO, AFailedWriteIsAnErrorNamingTheFile) {
  int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> bytes(4096, 7);
  Status s = writeAll(fd, bytes, "out.bin");
  ::close(fd);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("out.bin: cannot write byte 0 of 4096"), std::string::npos)
      << s.message();
}

TEST(FileIO, ReadingWhatIsNotARegularFileFailsAtOnce) {
  fs::path dir = freshDirectory("read");
  std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A FIFO with no writer would block open() and /dev/zero would never end.
  for (const std::string &path : {fifo, dir.string(), std::string("/dev/zero")}) {
    Expected<std::vector<uint8_t>> r = readFileBytes(path);
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_NE(r.message().find(path + ": is a"), std::string::npos) << r.message();
    Expected<MappedBytes> m = mapFile(path);
    ASSERT_FALSE(m.ok()) << path;
    EXPECT_NE(m.message().find(path + ": is a"), std::string::npos) << m.message();
    EXPECT_FALSE(checkRegularFile(path).ok()) << path;
  }
  fs::remove_all(dir);
}

// A mapped file reads as its bytes and stays readable while its owner lives, after the file is
// replaced by rename or removed; an empty file maps to no bytes.
TEST(FileIO, AMappedFileKeepsItsBytesThroughARename) {
  fs::path dir = freshDirectory("map");
  std::string path = (dir / "model.bin").string();
  std::vector<uint8_t> first(10000), second(300, 9);
  for (size_t i = 0; i < first.size(); ++i)
    first[i] = uint8_t(i * 7 + 3);
  ASSERT_TRUE(writeFileAtomically(path, first).ok());
  Expected<MappedBytes> mapped = mapFile(path);
  ASSERT_TRUE(mapped.ok()) << mapped.message();
  ASSERT_TRUE(writeFileAtomically(path, second).ok());
  EXPECT_TRUE(std::equal(mapped->bytes.begin(), mapped->bytes.end(), first.begin(), first.end()));
  Expected<MappedBytes> again = mapFile(path);
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_TRUE(std::equal(again->bytes.begin(), again->bytes.end(), second.begin(), second.end()));
  fs::remove(path);
  MappedBytes kept = std::move(*mapped);
  EXPECT_EQ(kept.bytes.back(), first.back());

  std::string empty = (dir / "empty.bin").string();
  ASSERT_TRUE(writeFileAtomically(empty, std::vector<uint8_t>{}).ok());
  Expected<MappedBytes> none = mapFile(empty);
  ASSERT_TRUE(none.ok()) << none.message();
  EXPECT_TRUE(none->bytes.empty());
  fs::remove_all(dir);
}

TEST(FileIO, ASuccessfulWriteRemovesOnlyItsTargetsTemporariesOfDeadWriters) {
  fs::path dir = freshDirectory("stale");
  std::string target = (dir / "ckpt.safetensors").string();
  // 999999999 is above any pid_max: no such process. This process is alive.
  std::string self = std::to_string(::getpid());
  const char *removed[] = {"ckpt.safetensors.tmp.999999999.0",
                           "ckpt.safetensors.tmp.999999999.17"};
  std::string kept[] = {"ckpt.safetensors.tmp." + self + ".99", // a live writer's
                        "other.safetensors.tmp.999999999.0",    // another target's
                        "ckpt.safetensors.tmp.999999999.0.bak", "ckpt.safetensors.tmp.x.0",
                        "ckpt.safetensors.tmp.999999999."};
  for (const char *name : removed)
    std::ofstream(dir / name) << "stale";
  for (const std::string &name : kept)
    std::ofstream(dir / name) << "keep";
  ASSERT_TRUE(writeFileAtomically(target, std::vector<uint8_t>{1, 2}).ok());
  for (const char *name : removed)
    EXPECT_FALSE(fs::exists(dir / name)) << name;
  for (const std::string &name : kept)
    EXPECT_TRUE(fs::exists(dir / name)) << name;
  EXPECT_EQ(fs::file_size(target), 2u);
  fs::remove_all(dir);
}

} // namespace
} // namespace smelt::rt::test
