// .npy and IDX readers: round trips, and each malformed file rejected with a message naming
// the file and the problem.
#include "TestUtil.h"

#include "runtime/Idx.h"
#include "runtime/Mnist.h"
#include "runtime/Npy.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>

namespace smelt::test {
namespace {

std::string tempPath(const std::string &name) {
  return (std::filesystem::temp_directory_path() /
          ("smelt-test-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(Npy, RoundTripsEveryNumPyDtype) {
  SCOPED_TRACE("SMELT_TEST_SEED=" + std::to_string(rngSeed()));
  for (DType dtype : {DType::f32, DType::f16, DType::f64, DType::i32, DType::i64, DType::i1})
    for (std::vector<int64_t> shape : {std::vector<int64_t>{3, 5}, {7}, {}, {2, 0, 3}}) {
      rt::HostTensor t = randomTensor(shape, dtype);
      std::string path = tempPath("roundtrip.npy");
      ASSERT_TRUE(rt::writeNpy(path, t).ok());
      EXPECT_EQ(readBytes(path).size() % 64, t.byteSize() % 64) << "header padded to 64";
      rt::Expected<rt::HostTensor> back = rt::readNpy(path);
      ASSERT_TRUE(back.ok()) << back.message();
      EXPECT_EQ(back->type(), t.type());
      EXPECT_EQ(std::memcmp(back->raw(), t.raw(), t.byteSize()), 0);
      std::filesystem::remove(path);
    }
}

TEST(Npy, RejectsBf16OnWrite) {
  rt::HostTensor t = randomTensor({2}, DType::bf16);
  rt::Status s = rt::writeNpy(tempPath("bf16.npy"), t);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("NumPy has no bf16"), std::string::npos) << s.message();
}

TEST(Npy, MalformedFilesNameFileAndProblem) {
  rt::HostTensor t = randomTensor({2, 3}, DType::f32);
  std::string good = tempPath("good.npy");
  ASSERT_TRUE(rt::writeNpy(good, t).ok());
  std::string bytes = readBytes(good);
  auto header = [&](const std::string &dict) {
    std::string h = dict;
    h.append(118 - h.size() - 1, ' ');
    h += '\n';
    return std::string("\x93NUMPY\x01\x00\x76\x00", 10) + h;
  };
  struct Case {
    const char *name;
    std::string bytes;
    const char *expected;
  };
  const Case cases[] = {
      {"magic", "PK\x03\x04 not numpy at all", "magic"},
      {"version", std::string("\x93NUMPY\x07\x00\x10\x00", 10) + std::string(16, ' '),
       "version 7.0"},
      {"header", bytes.substr(0, 40), "truncated header: 118 bytes expected at offset 10"},
      {"data", bytes.substr(0, 140), "needs 24 bytes at offset 128"},
      {"extra", bytes + "xyz", "3 bytes after"},
      {"dtype", header("{'descr': '<c8', 'fortran_order': False, 'shape': (2, 3), }") +
                    std::string(48, '\0'),
       "dtype '<c8' is not supported"},
      {"endian", header("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }") +
                     std::string(24, '\0'),
       "big-endian"},
      {"fortran", header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }") +
                      std::string(24, '\0'),
       "Fortran-order"},
      {"dict", header("{'descr': '<f4'}"), "needs 'descr', 'fortran_order' and 'shape'"},
      {"bool", header("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }") + "\x01\x05",
       "bool byte 5 at offset 129"},
  };
  for (const Case &c : cases) {
    std::string path = tempPath(std::string(c.name) + ".npy");
    writeBytes(path, c.bytes);
    rt::Expected<rt::HostTensor> r = rt::readNpy(path);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_NE(r.message().find(path), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(c.expected), std::string::npos) << c.name << ": " << r.message();
    std::filesystem::remove(path);
  }
  rt::Expected<rt::HostTensor> missing = rt::readNpy(tempPath("does-not-exist.npy"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot open"), std::string::npos);
  std::filesystem::remove(good);
}

/// An IDX file: magic 0 0 8 rank, big-endian dims, then `data`.
std::string idx(const std::vector<uint32_t> &dims, const std::string &data, uint8_t type = 8) {
  std::string out = {0, 0, char(type), char(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8)
      out += char(d >> s);
  return out + data;
}

TEST(Idx, ReadsPlainAndGzipAndRejectsCorruptFiles) {
  std::string payload(2 * 3 * 4, '\x07');
  std::string plain = tempPath("ok.idx");
  writeBytes(plain, idx({2, 3, 4}, payload));
  rt::Expected<rt::IdxArray> a = rt::readIdx(plain);
  ASSERT_TRUE(a.ok()) << a.message();
  EXPECT_EQ(a->dims, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(a->data, std::vector<uint8_t>(payload.begin(), payload.end()));

  std::string gz = tempPath("ok.idx.gz");
  gzFile f = gzopen(gz.c_str(), "wb");
  std::string content = idx({5}, "\x01\x02\x03\x04\x05");
  gzwrite(f, content.data(), unsigned(content.size()));
  gzclose(f);
  rt::Expected<rt::IdxArray> b = rt::readIdx(gz);
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(b->data, (std::vector<uint8_t>{1, 2, 3, 4, 5}));

  struct Case {
    std::string bytes;
    const char *expected;
  };
  const Case cases[] = {{std::string("\x01\x02\x08\x01", 4), "not an IDX file"},
                        {idx({4}, "abcd", 0x0d), "element type 0x0d"},
                        {idx({2, 3}, "abc"), "truncated"},
                        {idx({2}, "abcd"), "longer"},
                        {std::string("\x00\x00", 2), "truncated"}};
  for (const Case &c : cases) {
    std::string path = tempPath("bad.idx");
    writeBytes(path, c.bytes);
    rt::Expected<rt::IdxArray> r = rt::readIdx(path);
    ASSERT_FALSE(r.ok()) << c.expected;
    EXPECT_NE(r.message().find(path), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(c.expected), std::string::npos) << r.message();
    std::filesystem::remove(path);
  }
  std::filesystem::remove(plain);
  std::filesystem::remove(gz);
}

TEST(Mnist, LoadsTheRealFashionMnistTestSet) {
  rt::Expected<rt::MnistSplit> test = rt::loadMnist("/usr/share/datasets/fashion-mnist", "t10k");
  ASSERT_TRUE(test.ok()) << test.message();
  EXPECT_EQ(test->images.type().shape, (std::vector<int64_t>{10000, 784}));
  EXPECT_EQ(test->labels.type().shape, (std::vector<int64_t>{10000}));
  std::vector<int> perClass(10, 0);
  for (int64_t i = 0; i < 10000; ++i)
    ++perClass[test->labels.data<int32_t>()[i]];
  EXPECT_EQ(perClass, std::vector<int>(10, 1000)); // the test set is balanced
}

} // namespace
} // namespace smelt::test
