// .npy files: round trips in every NumPy dtype, bytes exactly as NumPy writes them, format
// versions 2.0 and 3.0, Fortran order, and each malformed file (or what is not a file at all)
// rejected with the file name, the problem and the byte offset.
#include "RuntimeTestUtil.h"

#include "data/Npy.h"
#include "tests/unit/NotRegularFiles.h"

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
      {"shape", npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", ""),
       "malformed shape: expected a size"},
      {"huge",
       npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
               "4294967296), }",
               ""),
       "too large"},
      // 22 digits: the size saturates instead of overflowing int64 (npy_fuzz, under UBSan).
      {"digits",
       npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2202020210210200223202,), }",
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

/// readNpy of a file holding `bytes`, removed afterwards.
Expected<HostTensor> readNpyBytes(const std::string &name, const std::string &bytes) {
  std::string path = tempPath(name);
  writeBytes(path, bytes);
  Expected<HostTensor> r = readNpy(path);
  std::filesystem::remove(path);
  return r;
}

TEST(Npy, AcceptsEveryHeaderFormNumPyWritesOrReads) {
  const std::string data(24, '\0');
  for (const char *dict : {
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
           "{'shape': (2, 3,), 'descr': '<f4', 'fortran_order': False}",
           "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2,3)}",
           "{'descr':'<f4','fortran_order':False,'shape':(2L, 3L)}", // Python 2, format 1.0
           "  {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }  ",
       }) {
    Expected<HostTensor> t = readNpyBytes("forms.npy", npyFile(dict, data));
    ASSERT_TRUE(t.ok()) << dict << ": " << t.message();
    EXPECT_EQ(t->type(), (TensorType{DType::f32, {2, 3}})) << dict;
  }
  Expected<HostTensor> scalar = readNpyBytes(
      "scalar.npy", npyFile("{'descr': '<i8', 'fortran_order': False, 'shape': (), }",
                            std::string(8, '\x07')));
  ASSERT_TRUE(scalar.ok()) << scalar.message();
  EXPECT_EQ(scalar->type(), (TensorType{DType::i64, {}}));
}

TEST(Npy, RejectsHeadersThatAreNotExactlyNumPysDict) {
  const std::string data(24, '\0');
  struct Case {
    std::string dict;
    const char *expected;
  };
  const Case cases[] = {
      // A key inside a string value is text, not a key: this file's data is column-major.
      {"{'descr': '<f4', 'note': \"'fortran_order': False\", 'fortran_order': True, "
       "'shape': (2, 3)}",
       "unknown key 'note'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (3, 2)}",
       "key 'shape' appears twice"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6)}", "written (n,), not (n)"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3]}", "'shape' must be a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 03)}", "expected a size"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", "expected ',' or ')'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3L)}", "expected a size"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3)}", "must be True or False"},
      {"{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2, 3)}", "must be True or False"},
      {"{'descr': ['<f4'], 'fortran_order': False, 'shape': (2, 3)}", "dtype string"},
      {"{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3)}", "backslash"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3)}", "expected ',' or '}'"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}", "expected ',' or '}'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)} x", "only spaces may follow"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3),, }", "expected a key"},
      {"{'descr': '<f4', 'shape': (2, 3)}", "missing: 'fortran_order'"},
      {"('descr', '<f4')", "expected the header dict's '{'"},
  };
  for (const Case &c : cases) {
    // Format 3.0: no Python 2 sizes ("3L").
    Expected<HostTensor> r = readNpyBytes("strict.npy", npyFile(c.dict, data, 3));
    ASSERT_FALSE(r.ok()) << c.dict << " was accepted";
    EXPECT_NE(r.message().find("malformed header at offset"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(c.expected), std::string::npos) << c.dict << ": " << r.message();
  }
  // The spec's frame around the dict: the version's minor number, the closing newline.
  std::string noNewline = npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}",
                                  data);
  noNewline[127] = ' ';
  Expected<HostTensor> r = readNpyBytes("newline.npy", noNewline);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("does not end with a newline"), std::string::npos) << r.message();
  std::string minor = npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", data);
  minor[7] = 1;
  r = readNpyBytes("minor.npy", minor);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("version 1.1"), std::string::npos) << r.message();
}

TEST(Npy, HeadersOfAHundredThousandCharactersNeedNoDeepStack) {
  // std::regex recursed once per character of these and overflowed the stack.
  std::string spaces(100000, ' ');
  Expected<HostTensor> padded = readNpyBytes(
      "spaces.npy", npyFile("{'descr': '<f4'," + spaces + "'fortran_order': False, 'shape': (2,)}",
                            std::string(8, '\0'), 2));
  ASSERT_TRUE(padded.ok()) << padded.message();
  EXPECT_EQ(padded->type(), (TensorType{DType::f32, {2}}));

  std::string descr = "{'descr': '";
  descr.append(100000, 'f');
  descr += "', 'fortran_order': False, 'shape': (2,)}";
  Expected<HostTensor> longDescr =
      readNpyBytes("descr.npy", npyFile(descr, std::string(8, '\0'), 2));
  ASSERT_FALSE(longDescr.ok());
  EXPECT_NE(longDescr.message().find("dtype 'ffffffffffffffff...' is not supported"),
            std::string::npos)
      << longDescr.message().substr(0, 200);

  std::string ones;
  for (int i = 0; i < 30000; ++i)
    ones += "1, ";
  Expected<HostTensor> longShape = readNpyBytes(
      "shape.npy", npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (" + ones + ")}",
                           std::string(4, '\0'), 2));
  ASSERT_FALSE(longShape.ok());
  EXPECT_NE(longShape.message().find("more than 64 dimensions"), std::string::npos)
      << longShape.message();
}

TEST(Npy, ReadsFortranOrderIntoRowMajor) {
  // np.asfortranarray(np.arange(6).reshape(2, 3)) stores 0 3 1 4 2 5.
  std::vector<int32_t> fortran = {0, 3, 1, 4, 2, 5};
  Expected<HostTensor> t = readNpyBytes(
      "fortran.npy", npyFile("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                             std::string(reinterpret_cast<const char *>(fortran.data()), 24)));
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->toDoubles(), (std::vector<double>{0, 1, 2, 3, 4, 5}));
  // Rank 3: element (i, j, k) sits at i + 2 j + 6 k in column-major order.
  std::vector<double> columnMajor(24), expected(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        columnMajor[size_t(i + 2 * j + 6 * k)] = 100 * i + 10 * j + k;
        expected[size_t(12 * i + 4 * j + k)] = 100 * i + 10 * j + k;
      }
  t = readNpyBytes("fortran3.npy",
                   npyFile("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3, 4), }",
                           std::string(reinterpret_cast<const char *>(columnMajor.data()), 192)));
  ASSERT_TRUE(t.ok()) << t.message();
  EXPECT_EQ(t->toDoubles(), expected);
}

TEST(Npy, ReadsEightAndSixteenBitIntegersAsInt32) {
  // A quantized model's uint8 image or int16 audio: values as NumPy stores them, little-endian,
  // widened to int32 with their sign, in C and Fortran order.
  std::string u1 = {char(0), char(255), char(128), char(7), char(200), char(1)};
  std::vector<int16_t> i2 = {-32768, 32767, -1, 12345, 0, -300};
  struct Case {
    const char *descr;
    std::string bytes;
    std::vector<double> values;
  };
  std::vector<Case> cases = {
      {"|u1", u1, {0, 255, 128, 7, 200, 1}},
      {"|i1", u1, {0, -1, -128, 7, -56, 1}},
      {"<i2",
       std::string(reinterpret_cast<const char *>(i2.data()), 12),
       {-32768, 32767, -1, 12345, 0, -300}},
      {"<u2",
       std::string(reinterpret_cast<const char *>(i2.data()), 12),
       {32768, 32767, 65535, 12345, 0, 65236}},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.descr);
    Expected<HostTensor> t =
        readNpyBytes("narrow.npy", npyFile(std::string("{'descr': '") + c.descr +
                                               "', 'fortran_order': False, 'shape': (2, 3), }",
                                           c.bytes));
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_EQ(t->type().dtype, DType::i32);
    EXPECT_EQ(t->toDoubles(), c.values);
    // The same bytes read column-major: element (i, j) is stored at i + 2 j.
    t = readNpyBytes("narrow-fortran.npy",
                     npyFile(std::string("{'descr': '") + c.descr +
                                 "', 'fortran_order': True, 'shape': (2, 3), }",
                             c.bytes));
    ASSERT_TRUE(t.ok()) << t.message();
    const std::vector<double> &v = c.values;
    EXPECT_EQ(t->toDoubles(), (std::vector<double>{v[0], v[2], v[4], v[1], v[3], v[5]}));
    // One byte short is a truncated file, named in the stored width.
    t = readNpyBytes("narrow-short.npy",
                     npyFile(std::string("{'descr': '") + c.descr +
                                 "', 'fortran_order': False, 'shape': (2, 3), }",
                             c.bytes.substr(1)));
    ASSERT_FALSE(t.ok());
    EXPECT_NE(t.message().find("truncated data"), std::string::npos) << t.message();
    // No elements: no data, an empty int32 tensor (the fuzzer's find).
    t = readNpyBytes("narrow-empty.npy",
                     npyFile(std::string("{'descr': '") + c.descr +
                                 "', 'fortran_order': False, 'shape': (0, 3), }",
                             ""));
    ASSERT_TRUE(t.ok()) << t.message();
    EXPECT_EQ(t->type().shape, (std::vector<int64_t>{0, 3}));
  }
}

TEST(Npy, DirectoriesDevicesAndFifosAreErrorsNamingTheFile) {
  smelt::test::expectNotRegularFilesRefused(
      tempPath("dir.npy"), tempPath("fifo.npy"), [](const std::string &path) {
        Expected<HostTensor> r = readNpy(path);
        return r.ok() ? std::string() : r.message();
      });
}

TEST(Npy, WritesThroughATemporaryNoOtherWriterUses) {
  // Another run's `<file>.tmp` (here a directory, which the fixed name could not even open).
  std::string path = tempPath("shared.npy");
  std::filesystem::create_directory(path + ".tmp");
  ASSERT_TRUE(writeNpy(path, HostTensor::fromVector<int32_t>({2}, {4, 5})).ok());
  EXPECT_TRUE(std::filesystem::is_directory(path + ".tmp"));
  Expected<HostTensor> back = readNpy(path);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->toDoubles(), (std::vector<double>{4, 5}));
  std::filesystem::remove(path + ".tmp");
  std::filesystem::remove(path);
}

} // namespace
} // namespace smelt::rt::test
