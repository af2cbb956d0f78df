// ExternalData: external tensors' bytes, read as the ONNX spec defines them and no further: a
// location must stay inside the model's folder (a model is untrusted input, and a location
// such as "../../home/u/.ssh/id_rsa" or a symbolic link out of the folder would read any file
// the user can), and each byte of a file belongs to at most one tensor.
#include "frontend/onnx/ExternalData.h"

#include "ir/ConstantData.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SHA1.h"

namespace smelt::onnx {

using ::onnx::TensorProto;

ExternalData::ExternalData(const std::string &modelPath) {
  llvm::StringRef parent = llvm::sys::path::parent_path(modelPath);
  folder_ = parent.empty() ? "." : parent.str();
  llvm::SmallString<256> real;
  if (!llvm::sys::fs::real_path(folder_, real))
    realFolder_ = real.str().str();
}

/// The value of `key` in `proto`'s external_data, or nullopt.
static std::optional<std::string> entry(const TensorProto &proto, llvm::StringRef key) {
  std::optional<std::string> found;
  for (const ::onnx::StringStringEntryProto &e : proto.external_data())
    if (e.key() == key)
      found = e.value();
  return found;
}

/// The integer value of `key` (offset, length), or `fallback` when absent.
static uint64_t entryNumber(const TensorProto &proto, llvm::StringRef key, uint64_t fallback,
                            const std::string &what) {
  std::optional<std::string> text = entry(proto, key);
  if (!text)
    return fallback;
  uint64_t number;
  if (llvm::StringRef(*text).getAsInteger(10, number))
    fail(ImportErrorKind::BadFile,
         what + ": external data " + key.str() + " '" + *text + "' is not a non-negative integer");
  return number;
}

ExternalData::File &ExternalData::open(const std::string &location, const std::string &what) {
  auto refuse = [&](const std::string &why) {
    fail(ImportErrorKind::BadFile, what + ": external data location '" + location + "' " + why);
  };
  if (location.empty())
    refuse("is empty");
  if (llvm::sys::path::is_absolute(location))
    refuse("is absolute; it must be relative to the model's folder");
  for (llvm::StringRef part :
       llvm::make_range(llvm::sys::path::begin(location), llvm::sys::path::end(location)))
    if (part == "..")
      refuse("leaves the model's folder ('..')");
  llvm::SmallString<256> path(folder_);
  llvm::sys::path::append(path, location);
  llvm::SmallString<256> real;
  if (std::error_code ec = llvm::sys::fs::real_path(path, real))
    refuse("cannot be opened (" + path.str().str() + ": " + ec.message() + ")");
  if (realFolder_.empty() || !llvm::StringRef(real).starts_with(realFolder_ + "/"))
    refuse("resolves to " + real.str().str() + ", outside the model's folder");
  std::string key = real.str().str();
  if (auto it = files_.find(key); it != files_.end())
    return it->second;
  if (!llvm::sys::fs::is_regular_file(real))
    refuse("is not a regular file");
  // Large files are memory-mapped: the weights are never read before a kernel needs them.
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(real, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer)
    refuse("cannot be read (" + buffer.getError().message() + ")");
  File &file = files_[key];
  file.buffer = std::move(*buffer);
  file.location = location;
  return file;
}

void ExternalData::claimRange(File &file, uint64_t begin, uint64_t end, const std::string &what) {
  if (begin == end)
    return; // an empty tensor owns no byte
  auto next = file.ranges.lower_bound(begin);
  auto overlaps = [&](auto it) {
    fail(ImportErrorKind::BadFile,
         what + ": external data (bytes " + std::to_string(begin) + " to " + std::to_string(end) +
             " of '" + file.location + "') overlaps those of " + it->second.second + " (bytes " +
             std::to_string(it->first) + " to " + std::to_string(it->second.first) + ")");
  };
  if (next != file.ranges.end() && next->first < end)
    overlaps(next);
  if (next != file.ranges.begin() && std::prev(next)->second.first > begin)
    overlaps(std::prev(next));
  file.ranges.emplace(begin, std::make_pair(end, what));
}

WeightBytes ExternalData::read(const TensorProto &proto, const TensorLayout &layout,
                               const std::string &what) {
  std::optional<std::string> location = entry(proto, "location");
  if (!location)
    fail(ImportErrorKind::BadFile, what + ": external data without a location");
  File &file = open(*location, what);
  uint64_t size = file.buffer->getBufferSize();
  uint64_t offset = entryNumber(proto, "offset", 0, what);
  if (offset > size)
    fail(ImportErrorKind::BadFile, what + ": external data starts at byte " +
                                       std::to_string(offset) + " of '" + *location +
                                       "', which has " + std::to_string(size) + " bytes");
  uint64_t length = entryNumber(proto, "length", size - offset, what);
  if (length > size - offset)
    fail(ImportErrorKind::BadFile, what + ": external data needs bytes " + std::to_string(offset) +
                                       " to " + std::to_string(offset + length) + " of '" +
                                       *location + "', which has " + std::to_string(size) +
                                       " (a truncated file?)");
  checkRawSize(what + " (external data)", size_t(length), layout);
  if (std::optional<std::string> checksum = entry(proto, "checksum");
      checksum && !file.checksumVerified) {
    // onnx.proto: "SHA1 digest of file specified in under 'location' key" (the whole file).
    llvm::StringRef bytes = file.buffer->getBuffer();
    std::array<uint8_t, 20> digest = llvm::SHA1::hash(
        llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
    std::string hex = llvm::toHex(digest, /*LowerCase=*/true);
    if (llvm::StringRef(*checksum).lower() != hex)
      fail(ImportErrorKind::BadFile, what + ": external data file '" + *location + "' has SHA-1 " +
                                         hex + ", not the checksum " + *checksum +
                                         " the model states");
    file.checksumVerified = true;
  }
  claimRange(file, offset, offset + length, what);
  llvm::StringRef data = file.buffer->getBuffer().substr(offset, length);
  return WeightBytes{file.buffer, data,
                     file.buffer->getBufferKind() == llvm::MemoryBuffer::MemoryBuffer_MMap};
}

Weight ExternalData::weight(const TensorProto &proto, const std::string &what) {
  TensorLayout layout = tensorLayout(proto, what);
  WeightBytes bytes = read(proto, layout, what);
  // Constants are read as arrays of their element type: an offset that is not a multiple of
  // its width (ONNX only says offsets SHOULD be page multiples) gets an aligned copy.
  if (reinterpret_cast<uintptr_t>(bytes.data.data()) % layout.fileWidth) {
    auto copy = std::make_shared<std::string>(bytes.data.str());
    // The copy is the weight from now on: the mapped pages it came from leave memory (the
    // dynamo exporter packs tensors without padding, so a model can have dozens of these).
    if (bytes.fileMapped)
      releaseFilePages(bytes.data);
    bytes = WeightBytes{copy, llvm::StringRef(*copy)};
  }
  return fileWeight(layout, std::move(bytes));
}

void ExternalData::inlineInto(TensorProto &proto, const std::string &what) {
  TensorLayout layout = tensorLayout(proto, what);
  WeightBytes bytes = read(proto, layout, what);
  proto.set_raw_data(bytes.data.data(), bytes.data.size());
  proto.set_data_location(TensorProto::DEFAULT);
  proto.clear_external_data();
}

} // namespace smelt::onnx
