// .npy reader and writer: the magic, version, header dict ('descr', 'fortran_order', 'shape')
// and raw little-endian data.
#include "data/Npy.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>

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

/// The value text of `key` in the header dict, or nullopt.
std::optional<std::string> dictValue(const std::string &header, const std::string &key) {
  std::smatch m;
  std::regex pattern("'" + key + "'\\s*:\\s*('[^']*'|True|False|\\([^)]*\\))");
  if (!std::regex_search(header, m, pattern))
    return std::nullopt;
  return m[1].str();
}

} // namespace

Expected<HostTensor> readNpy(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto error = [&](const std::string &what) { return Status::error(path + ": " + what); };

  if (bytes.compare(0, 6, "\x93NUMPY") != 0)
    return error("not a .npy file: the magic \\x93NUMPY is missing at offset 0");
  if (bytes.size() < 10)
    return error(fmt::format("truncated: the version and header length at offset 6 need 4 "
                             "bytes, the file has {} in all",
                             bytes.size()));
  int major = uint8_t(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = uint8_t(bytes[8]) | size_t(uint8_t(bytes[9])) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12)
      return error("truncated: the header length at offset 8 needs 4 bytes");
    headerLen = 0;
    for (int i = 0; i < 4; ++i)
      headerLen |= size_t(uint8_t(bytes[8 + i])) << (8 * i);
    headerStart = 12;
  } else {
    return error(fmt::format("unsupported .npy format version {}.{} at offset 6", major,
                             int(uint8_t(bytes[7]))));
  }
  if (bytes.size() < headerStart + headerLen)
    return error(fmt::format("truncated header: {} bytes expected at offset {}, file has {}",
                             headerLen, headerStart, bytes.size()));
  std::string header = bytes.substr(headerStart, headerLen);

  std::optional<std::string> descr = dictValue(header, "descr");
  std::optional<std::string> fortran = dictValue(header, "fortran_order");
  std::optional<std::string> shapeText = dictValue(header, "shape");
  if (!descr || !fortran || !shapeText)
    return error(fmt::format("malformed header at offset {}: needs 'descr', 'fortran_order' "
                             "and 'shape': {}",
                             headerStart, header));
  std::string code = descr->substr(1, descr->size() - 2);
  std::optional<DType> dtype;
  for (const NpyDType &d : kNpyDTypes)
    if (code == d.descr)
      dtype = d.dtype;
  if (!dtype) {
    if (code.size() == 3 && code[0] == '>')
      return error("big-endian data ('" + code + "') is not supported; save it little-endian");
    return error("dtype '" + code + "' is not supported (float32, float16, float64, int32, "
                 "int64 or bool)");
  }
  if (*fortran == "True")
    return error("Fortran-order arrays are not supported; save with np.ascontiguousarray");

  TensorType type{*dtype, {}};
  std::string dims = shapeText->substr(1, shapeText->size() - 2);
  for (size_t pos = 0; pos < dims.size();) {
    size_t comma = dims.find(',', pos);
    std::string item = dims.substr(pos, comma == std::string::npos ? comma : comma - pos);
    if (item.find_first_not_of(" ") != std::string::npos) {
      char *end;
      long long d = std::strtoll(item.c_str(), &end, 10);
      if (d < 0 || item.find_first_not_of(" 0123456789L") != std::string::npos)
        return error("malformed shape " + *shapeText + " in the header");
      // Reject sizes whose byte count would overflow before anything is allocated.
      if (d > 0 && type.numElements() > (int64_t(1) << 50) / d)
        return error("shape " + *shapeText + " in the header is too large");
      type.shape.push_back(d);
    }
    if (comma == std::string::npos)
      break;
    pos = comma + 1;
  }
  size_t dataStart = headerStart + headerLen, need = type.byteSize();
  if (bytes.size() - dataStart < need)
    return error(fmt::format("truncated data: {} needs {} bytes at offset {}, file has {}",
                             type.str(), need, dataStart, bytes.size() - dataStart));
  if (bytes.size() - dataStart > need)
    return error(fmt::format("{} bytes after the {} bytes of {} data at offset {}",
                             bytes.size() - dataStart - need, need, type.str(), dataStart));
  HostTensor tensor = HostTensor::zeros(type);
  std::memcpy(tensor.raw(), bytes.data() + dataStart, need);
  if (type.dtype == DType::i1)
    for (int64_t i = 0; i < type.numElements(); ++i)
      if (tensor.data<uint8_t>()[i] > 1)
        return error(fmt::format("bool byte {} at offset {} is not 0 or 1",
                                 int(tensor.data<uint8_t>()[i]), dataStart + i));
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

  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << prefix << header;
    out.write(static_cast<const char *>(tensor.raw()), std::streamsize(tensor.byteSize()));
    if (!out.flush())
      return Status::error(fmt::format("{}: cannot write: {}", tmp, std::strerror(errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    return Status::error(fmt::format("{}: cannot rename into place: {}", path,
                                     std::strerror(errno)));
  return Status();
}

} // namespace smelt::data
