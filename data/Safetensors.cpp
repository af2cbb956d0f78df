// safetensors reader and writer on nlohmann::json, with atomic replacement on write.
#include "data/Safetensors.h"

#include "runtime/FileIO.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <unistd.h>

namespace smelt::data {

using namespace rt;

namespace {

struct DTypeCode {
  DType dtype;
  const char *code;
};
constexpr DTypeCode kCodes[] = {{DType::f32, "F32"}, {DType::f16, "F16"}, {DType::bf16, "BF16"},
                                {DType::f64, "F64"}, {DType::i32, "I32"}, {DType::i64, "I64"},
                                {DType::i1, "BOOL"}};

/// Where the header text breaks the format's shape before it is parsed: it must start with `{`
/// (no byte-order mark or space) and nest at most 3 deep (the header object, a tensor's entry
/// or __metadata__, a shape or offsets list). Deeper nesting is refused here because
/// nlohmann::json copies and prints values recursively: 100,000 `[` overflowed the stack.
std::optional<std::string> headerShapeError(const uint8_t *text, size_t length) {
  constexpr int kMaxDepth = 3;
  if (length == 0 || text[0] != '{')
    return "the header at offset 8 does not start with '{'";
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < length; ++i) {
    char c = char(text[i]);
    if (inString) {
      if (c == '\\')
        ++i; // the escaped character cannot end the string
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxDepth)
        return fmt::format("the header nests deeper than {} levels at byte offset {}",
                           kMaxDepth, 8 + i);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return std::nullopt;
}

} // namespace

Status writeSafetensors(const std::string &path, const Checkpoint &checkpoint) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!checkpoint.metadata.empty())
    header["__metadata__"] = checkpoint.metadata;
  size_t offset = 0;
  for (const NamedTensor &t : checkpoint.tensors) {
    const char *code = nullptr;
    for (const DTypeCode &c : kCodes)
      if (c.dtype == t.tensor.type().dtype)
        code = c.code;
    header[t.name] = {{"dtype", code},
                      {"shape", t.tensor.type().shape},
                      {"data_offsets", {offset, offset + t.tensor.byteSize()}}};
    offset += t.tensor.byteSize();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' '); // the spec allows padding the header with spaces
  uint64_t length = text.size();

  return writeFileAtomically(path, [&](int fd, const std::string &tmp) {
    uint8_t prefix[8];
    for (int i = 0; i < 8; ++i)
      prefix[i] = uint8_t(length >> (8 * i));
    if (Status s = writeAll(fd, prefix, sizeof prefix, tmp); !s.ok())
      return s;
    if (Status s = writeAll(fd, text.data(), text.size(), tmp); !s.ok())
      return s;
    for (const NamedTensor &t : checkpoint.tensors)
      if (Status s = writeAll(fd, t.tensor.raw(), t.tensor.byteSize(), tmp); !s.ok())
        return s;
    return Status();
  });
}

Expected<Checkpoint> readSafetensors(const std::string &path) {
  // Each tensor is read from the file straight into its own memory: the file is never held
  // whole, so a model's weights are in memory once.
  uint64_t size = 0;
  SMELT_ASSIGN_OR_RETURN(int fd, openRegularFile(path, &size));
  std::unique_ptr<int, void (*)(int *)> closer(&fd, [](int *f) { ::close(*f); });
  auto error = [&](const std::string &what) { return Status::error(path + ": " + what); };
  size_t fileSize = size_t(size);
  if (fileSize < 8)
    return error("truncated: the 8-byte header length is missing");
  uint8_t lengthBytes[8];
  SMELT_RETURN_IF_ERROR(readAll(fd, lengthBytes, 8, 0, path));
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= uint64_t(lengthBytes[i]) << (8 * i);
  if (length > fileSize - 8)
    return error(fmt::format("header length {} at offset 0 runs past the end of the file "
                             "({} bytes)",
                             length, fileSize));
  std::vector<uint8_t> headerBytes(length);
  SMELT_RETURN_IF_ERROR(readAll(fd, headerBytes.data(), headerBytes.size(), 8, path));
  if (std::optional<std::string> shape = headerShapeError(headerBytes.data(), size_t(length)))
    return error(*shape);
  // Unordered: the tensors are put in the order of their data below, and an ordered_json
  // checks each new key against all before it (quadratic in the number of tensors).
  nlohmann::json header = nlohmann::json::parse(headerBytes, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return error("the header at offset 8 is not a JSON object");
  size_t dataStart = 8 + length, dataSize = fileSize - dataStart;

  Checkpoint checkpoint;
  struct Entry {
    std::string name;
    TensorType type;
    size_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto &[name, entry] : header.items()) {
    if (name == "__metadata__") {
      // The format's metadata maps strings to strings; a number there is a damaged or
      // foreign file, not something to skip.
      if (!entry.is_object())
        return error("__metadata__ is not a JSON object");
      for (auto &[key, value] : entry.items()) {
        if (!value.is_string())
          return error("__metadata__ '" + key + "' is " + value.dump() + ", not a string");
        checkpoint.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    // A named copy, not the structured binding: clang before 16 cannot capture bindings (the
    // fuzz targets build with clang).
    const std::string &tensorName = name;
    auto bad = [&](const std::string &what) {
      return error("tensor '" + tensorName + "': " + what);
    };
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets") || !entry["dtype"].is_string() ||
        !entry["shape"].is_array() || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2)
      return bad("needs dtype, shape and data_offsets [begin, end]");
    std::optional<DType> dtype;
    for (const DTypeCode &c : kCodes)
      if (entry["dtype"] == c.code)
        dtype = c.dtype;
    if (!dtype)
      return bad("dtype " + entry["dtype"].get<std::string>() + " is not supported");
    TensorType type{*dtype, {}};
    for (auto &d : entry["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
        return bad("shape " + entry["shape"].dump() + " is not a list of sizes");
      type.shape.push_back(d.get<int64_t>());
    }
    // Before anything multiplies the dimensions: their product may not fit (the fuzzer found
    // [236666666666696666, 2555555555555555555]).
    Expected<uint64_t> typeBytes = checkedByteSize(type, "shape");
    if (!typeBytes)
      return bad(typeBytes.message());
    auto &offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      return bad("data_offsets must be unsigned integers");
    size_t begin = offsets[0].get<size_t>(), end = offsets[1].get<size_t>();
    if (begin > end || end > dataSize)
      return bad(fmt::format("data_offsets [{}, {}] fall outside the {} bytes of data", begin,
                             end, dataSize));
    if (end - begin != *typeBytes)
      return bad(fmt::format("{} needs {} bytes but data_offsets hold {}", type.str(),
                             *typeBytes, end - begin));
    entries.push_back({name, std::move(type), begin, end});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
    return std::pair(a.begin, a.end) < std::pair(b.begin, b.end);
  });
  // The tensors must tile the data exactly, as the safetensors library requires: a gap or
  // bytes left over mean the header length or an offset is wrong, and tensors would be read
  // shifted. Checked before any tensor is read.
  size_t covered = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].begin < covered)
      return error("tensors '" + entries[i - 1].name + "' and '" + entries[i].name + "' overlap");
    if (entries[i].begin > covered)
      return error(
          fmt::format("data bytes [{}, {}) belong to no tensor", covered, entries[i].begin));
    covered = entries[i].end;
  }
  if (covered != dataSize)
    return error(fmt::format("the tensors hold {} bytes but the data after the header at offset "
                             "{} has {}",
                             covered, dataStart, dataSize));
  for (Entry &entry : entries) {
    std::string what = path + ": tensor '" + entry.name + "'";
    SMELT_ASSIGN_OR_RETURN(HostTensor tensor, HostTensor::allocate(entry.type, what));
    SMELT_RETURN_IF_ERROR(
        readAll(fd, tensor.raw(), entry.end - entry.begin, dataStart + entry.begin, what));
    checkpoint.tensors.push_back({std::move(entry.name), std::move(tensor)});
  }
  return checkpoint;
}

} // namespace smelt::data
