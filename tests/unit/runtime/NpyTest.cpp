// .npy files: round trips in every NumPy dtype, bytes exactly as NumPy writes them, format
// versions 2.0 and 3.0, and each malformed file rejected with the file name, the problem and
// the byte offset.
#include "RuntimeTestUtil.h"

#include "data/Npy.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace smelt::rt::test {
namespace {

// .npy is a data format (data/Npy.h), tested here beside the runtime tensors it reads into.
using data::readNpy;
using data::writeNpy;

std::string tempPath(const std::string &name) {
  return (std::filesystem::temp_directory_path() /
          ("smelt-rt-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// A .npy file of format `major`.0 with header `dict` (padded as NumPy pads it) and `data`.
std::string npyFile(const std::string &dict, const std::string &data, int major = 1) {
  size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  header.append((prefix + header.size() + 1 + 63) / 64 * 64 - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY", 6) + char(major) + '\0';
  for (size_t i = 0; i < prefix - 8; ++i)
    out += char((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

TEST(Npy, RoundTripsEveryNumPyDtypeAndShape) {
  for (DType dtype : {DType::f32, DType::f16, DType::f64, DType::i32, DType::i64, DType::i1})
    for (const std::vector<int64_t> &shape :
         {std::vector<int64_t>{3, 5}, {7}, {}, {2, 0, 3}, {2, 3, 4, 5}}) {
      HostTensor t = randomTensor(dtype, shape);
      std::string path = tempPath("roundtrip.npy");
      ASSERT_TRUE(writeNpy(path, t).ok());
      EXPECT_EQ((readBytes(path).size() - t.byteSize()) % 64, 0u) << "data starts on 64 bytes";
      Expected<HostTensor> back = readNpy(path);
      ASSERT_TRUE(back.ok()) << back.message();
      EXPECT_EQ(back->type(), t.type());
      EXPECT_EQ(std::memcmp(back->raw(), t.raw(), t.byteSize()), 0) << t.type().str();
      std::filesystem::remove(path);
    }
}

TEST(Npy, WritesAndReadsNumPysExactBytes) {
  // What np.save(f, np.arange(6, dtype='<i4').reshape(2, 3)) writes.
  std::string numpy = npyFile("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }",
                              std::string("\0\0\0\0\1\0\0\0\2\0\0\0\3\0\0\0\4\0\0\0\5\0\0\0", 24));
  ASSERT_EQ(numpy.size(), 152u);
  std::string path = tempPath("numpy.npy");
  ASSERT_TRUE(writeNpy(path, HostTensor::fromVector<int32_t>({2, 3}, {0, 1, 2, 3, 4, 5})).ok());
  EXPECT_EQ(readBytes(path), numpy);
  Expected<HostTensor> back = readNpy(path);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->toDoubles(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  std::filesystem::remove(path);
}

TEST(Npy, ReadsFormatVersionsTwoAndThree) {
  for (int major : {2, 3}) {
    std::string path = tempPath("v" + std::to_string(major) + ".npy");
    float values[] = {1.5f, -2.25f, 3.0f};
    writeBytes(path, npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }",
                             std::string(reinterpret_cast<const char *>(values), 12), major));
    Expected<HostTensor> t = readNpy(path);
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_EQ(t->toDoubles(), (std::vector<double>{1.5, -2.25, 3.0}));
    std::filesystem::remove(path);
  }
}

TEST(Npy, RejectsBf16OnWriteSuggestingAConversion) {
  std::string path = tempPath("bf16.npy");
  Status s = writeNpy(path, randomTensor(DType::bf16, {2}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path + ": NumPy has no bf16"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("convert"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Npy, MalformedFilesNameTheFileTheProblemAndTheOffset) {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string good = npyFile(f4, std::string(24, '\x01'));
  struct Case {
    const char *name;
    std::string bytes;
    const char *expected;
  };
  const Case cases[] = {
      {"magic", "PK\x03\x04 a zip, not numpy", "magic \\x93NUMPY is missing at offset 0"},
      {"short", std::string("\x93NUMPY\x01", 7), "at offset 6 need 4 bytes"},
      {"version", std::string("\x93NUMPY\x07\x00\x10\x00", 10) + std::string(16, ' '),
       "unsupported .npy format version 7.0 at offset 6"},
      {"header", good.substr(0, 40), "truncated header: 118 bytes expected at offset 10"},
      {"dict", npyFile("{'descr': '<f4'}", ""), "malformed header at offset 10"},
      {"dtype",
       npyFile("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", std::string(16, '\0')),
       "dtype '<c8' is not supported"},
      {"endian",
       npyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0')),
       "big-endian data ('>f4')"},
      {"fortran",
       npyFile("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", std::string(24, '\0')),
       "Fortran-order"},
      {"shape", npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", ""),
       "malformed shape (2, -3)"},
      {"huge",
       npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
               "4294967296), }",
               ""),
       "too large"},
      {"data", good.substr(0, 100 + 28), "needs 24 bytes at offset 128, file has 0"},
      {"data-part", good.substr(0, 140), "needs 24 bytes at offset 128, file has 12"},
      {"extra", good + "xyz", "3 bytes after the 24 bytes of tensor<2x3xf32> data at offset 128"},
      {"bool", npyFile("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }", "\x01\x05"),
       "bool byte 5 at offset 129 is not 0 or 1"},
  };
  for (const Case &c : cases) {
    std::string path = tempPath(std::string(c.name) + ".npy");
    writeBytes(path, c.bytes);
    Expected<HostTensor> r = readNpy(path);
    ASSERT_FALSE(r.ok()) << c.name << " was accepted";
    EXPECT_EQ(r.message().rfind(path + ": ", 0), 0u) << c.name << ": " << r.message();
    EXPECT_NE(r.message().find(c.expected), std::string::npos) << c.name << ": " << r.message();
    std::filesystem::remove(path);
  }
  Expected<HostTensor> missing = readNpy(tempPath("does-not-exist.npy"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot open"), std::string::npos) << missing.message();
}

} // namespace
} // namespace smelt::rt::test
