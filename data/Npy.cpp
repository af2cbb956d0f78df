// .npy reader and writer: the magic, version and header length, the header dict (parsed by
// NpyHeader.cpp) and the raw little-endian data, in C or Fortran order.
#include "data/Npy.h"

#include "data/NpyHeader.h"
#include "runtime/FileIO.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

namespace smelt::data {

using namespace rt;

namespace {

struct NpyDType {
  const char *descr;
  DType dtype;
};
constexpr NpyDType kNpyDTypes[] = {{"<f4", DType::f32}, {"<f2", DType::f16},
                                   {"<f8", DType::f64}, {"<i4", DType::i32},
                                   {"<i8", DType::i64}, {"|b1", DType::i1}};

/// 8- and 16-bit integers (a quantized model's inputs), read as int32, which Smelt carries
/// them as.
struct NarrowNpy {
  const char *descr;
  size_t width;
  bool isSigned;
};
constexpr NarrowNpy kNarrowNpy[] = {
    {"|u1", 1, false}, {"|i1", 1, true}, {"<u2", 2, false}, {"<i2", 2, true}};

/// The little-endian integers of `narrow` at `data` as int32 bytes.
std::vector<uint8_t> widened(const NarrowNpy &narrow, const uint8_t *data, int64_t count) {
  std::vector<uint8_t> wide(size_t(count) * 4);
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t *at = data + size_t(i) * narrow.width;
    uint32_t bits = narrow.width == 1 ? at[0] : uint32_t(at[0] | at[1] << 8);
    int32_t value = !narrow.isSigned    ? int32_t(bits)
                    : narrow.width == 1 ? int32_t(int8_t(bits))
                                        : int32_t(int16_t(bits));
    std::memcpy(&wide[size_t(i) * 4], &value, 4);
  }
  return wide;
}

/// The row-major (C order) copy of `fortran`, the column-major bytes of `type`: walks the
/// row-major order with an odometer over the index, keeping the column-major offset of it.
void fortranToC(const TensorType &type, const uint8_t *fortran, uint8_t *c) {
  size_t rank = type.shape.size(), element = size_t(byteWidth(type.dtype));
  std::vector<int64_t> index(rank, 0), stride(rank, 1);
  for (size_t k = 1; k < rank; ++k)
    stride[k] = stride[k - 1] * type.shape[k - 1];
  int64_t from = 0;
  for (int64_t to = 0, n = type.numElements(); to < n; ++to) {
    std::memcpy(c + size_t(to) * element, fortran + size_t(from) * element, element);
    for (size_t k = rank; k-- > 0;) {
      if (++index[k] < type.shape[k]) {
        from += stride[k];
        break;
      }
      from -= (type.shape[k] - 1) * stride[k];
      index[k] = 0;
    }
  }
}

} // namespace

Expected<HostTensor> readNpy(const std::string &path) {
  Expected<std::vector<uint8_t>> file = readFileBytes(path);
  if (!file)
    return file.status();
  const std::vector<uint8_t> &bytes = *file;
  auto error = [&](const std::string &what) { return Status::error(path + ": " + what); };

  if (bytes.size() < 6 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0)
    return error("not a .npy file: the magic \\x93NUMPY is missing at offset 0");
  if (bytes.size() < 10)
    return error(fmt::format("truncated: the version and header length at offset 6 need 4 "
                             "bytes, the file has {} in all",
                             bytes.size()));
  int major = bytes[6], minor = bytes[7];
  if ((major < 1 || major > 3) || minor != 0)
    return error(fmt::format("unsupported .npy format version {}.{} at offset 6 (1.0, 2.0 or "
                             "3.0)",
                             major, minor));
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = bytes[8] | size_t(bytes[9]) << 8;
    headerStart = 10;
  } else {
    if (bytes.size() < 12)
      return error("truncated: the header length at offset 8 needs 4 bytes");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t(bytes[8 + i]) << (8 * i);
    headerStart = 12;
  }
  if (bytes.size() < headerStart + headerLen)
    return error(fmt::format("truncated header: {} bytes expected at offset {}, file has {}",
                             headerLen, headerStart, bytes.size()));
  std::string_view text(reinterpret_cast<const char *>(bytes.data()) + headerStart, headerLen);
  Expected<NpyHeader> header = parseNpyHeader(text, headerStart, /*python2Ints=*/major < 3);
  if (!header)
    return error(header.message());

  std::optional<DType> dtype;
  for (const NpyDType &d : kNpyDTypes)
    if (header->descr == d.descr)
      dtype = d.dtype;
  const NarrowNpy *narrow = nullptr;
  for (const NarrowNpy &d : kNarrowNpy)
    if (header->descr == d.descr) {
      narrow = &d;
      dtype = DType::i32;
    }
  if (!dtype) {
    const std::string &code = header->descr;
    if (code.size() == 3 && code[0] == '>')
      return error("big-endian data ('" + code + "') is not supported; save it little-endian");
    // The start of the string is enough to say which it is; a header may be long.
    std::string shown = code.size() > 16 ? code.substr(0, 16) + "..." : code;
    return error("dtype '" + shown +
                 "' is not supported (float32, float16, float64, int8, "
                 "uint8, int16, uint16, int32, int64 or bool)");
  }
  TensorType type{*dtype, {}};
  for (int64_t d : header->shape) {
    // Reject sizes whose byte count would overflow before anything is allocated.
    if (d > 0 && type.numElements() > (int64_t(1) << 50) / d)
      return error(fmt::format("shape ({}) in the header is too large",
                               fmt::join(header->shape, ", ")));
    type.shape.push_back(d);
  }
  size_t dataStart = headerStart + headerLen,
         need = narrow ? size_t(type.numElements()) * narrow->width : type.byteSize();
  if (bytes.size() - dataStart < need)
    return error(fmt::format("truncated data: {} needs {} bytes at offset {}, file has {}",
                             type.str(), need, dataStart, bytes.size() - dataStart));
  if (bytes.size() - dataStart > need)
    return error(fmt::format("{} bytes after the {} bytes of {} data at offset {}",
                             bytes.size() - dataStart - need, need, type.str(), dataStart));
  HostTensor tensor = HostTensor::zeros(type);
  const uint8_t *data = bytes.data() + dataStart;
  std::vector<uint8_t> wide;
  if (narrow) {
    wide = widened(*narrow, data, type.numElements());
    data = wide.data();
    need = wide.size();
  }
  if (header->fortranOrder)
    fortranToC(type, data, static_cast<uint8_t *>(tensor.raw()));
  else if (need) // an empty tensor's widened data has no address
    std::memcpy(tensor.raw(), data, need);
  if (type.dtype == DType::i1)
    for (int64_t i = 0; i < type.numElements(); ++i)
      if (data[i] > 1)
        return error(fmt::format("bool byte {} at offset {} is not 0 or 1", int(data[i]),
                                 dataStart + size_t(i)));
  return tensor;
}

Status writeNpy(const std::string &path, const HostTensor &tensor) {
  const TensorType &type = tensor.type();
  const char *descr = nullptr;
  for (const NpyDType &d : kNpyDTypes)
    if (d.dtype == type.dtype)
      descr = d.descr;
  if (!descr)
    return Status::error(fmt::format("{}: NumPy has no {} type; convert the tensor to f32 "
                                     "(smelt.convert) before writing it",
                                     path, dtypeName(type.dtype)));
  // Python's tuple syntax: a one-element tuple needs its trailing comma.
  std::string shape = type.shape.size() == 1 ? fmt::format("({},)", type.shape[0])
                                             : fmt::format("({})", fmt::join(type.shape, ", "));
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                   descr, shape);
  // NumPy pads with spaces so the data starts on a 64-byte boundary, and ends with '\n'.
  size_t total = (10 + header.size() + 1 + 63) / 64 * 64;
  header.append(total - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string prefix = "\x93NUMPY\x01";
  prefix += '\0';
  prefix += char(header.size() & 0xff);
  prefix += char(header.size() >> 8);

  // Atomically, under a name no other writer uses: two runs writing into one output
  // directory never see each other's half-written file.
  return writeFileAtomically(path, [&](int fd, const std::string &tmp) {
    std::string head = prefix + header;
    if (Status s = writeAll(fd, head.data(), head.size(), tmp); !s.ok())
      return s;
    return writeAll(fd, tensor.raw(), tensor.byteSize(), tmp);
  });
}

} // namespace smelt::data
