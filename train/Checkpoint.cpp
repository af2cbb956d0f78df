// Checkpoint metadata and integrity (Checkpoint.h) over the safetensors reader and writer.
#include "train/Checkpoint.h"

#include "passes/Passes.h"

#include <fmt/format.h>
#include <zlib.h>

#include <limits>
#include <optional>

namespace smelt::train {

const char kCheckpointFormat[] = "smelt-checkpoint-2";

namespace {

/// CRC32 of the tensors' bytes, in file order, as 8 hex digits.
std::string tensorsCrc32(const std::vector<data::NamedTensor> &tensors) {
  uLong crc = crc32_z(0, nullptr, 0);
  for (const data::NamedTensor &t : tensors)
    crc = crc32_z(crc, static_cast<const Bytef *>(t.tensor.raw()), t.tensor.byteSize());
  return fmt::format("{:08x}", uint32_t(crc));
}

/// `text` as a plain decimal integer no larger than `max`: digits only, no sign, no leading
/// zeros; nullopt for anything else. Written by hand because std::stoll accepts " -5",
/// "0x10" as 0, "12abc" as 12, and throws where an error is wanted.
std::optional<uint64_t> parseDecimal(const std::string &text, uint64_t max) {
  if (text.empty() || (text[0] == '0' && text.size() > 1))
    return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return std::nullopt;
    uint64_t digit = uint64_t(c - '0');
    if (value > (max - digit) / 10)
      return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

} // namespace

bool isCheckpoint(const data::Checkpoint &file) {
  return file.metadata.count("model") && file.metadata.count("tensors_crc32");
}

rt::Status saveCheckpoint(const std::string &path, std::vector<data::NamedTensor> tensors,
                          const CheckpointInfo &info) {
  data::Checkpoint checkpoint;
  checkpoint.metadata = {{"format", kCheckpointFormat},
                         {"model", info.model},
                         {"precision", info.precision},
                         {"epochs_done", std::to_string(info.epochsDone)},
                         {"global_step", std::to_string(info.globalStep)},
                         {"seed", std::to_string(info.seed)},
                         {"batch", std::to_string(info.batch)},
                         {"tensors_crc32", tensorsCrc32(tensors)}};
  checkpoint.tensors = std::move(tensors);
  return data::writeSafetensors(path, checkpoint);
}

rt::Expected<LoadedCheckpoint> loadCheckpoint(const std::string &path) {
  rt::Expected<data::Checkpoint> checkpoint = data::readSafetensors(path);
  if (!checkpoint)
    return checkpoint.status();
  const std::map<std::string, std::string> &meta = checkpoint->metadata;
  auto bad = [&](const std::string &key, const std::string &what) {
    auto it = meta.find(key);
    return rt::Status::error(fmt::format("{}: checkpoint metadata '{}' {}", path, key,
                                         it == meta.end() ? "is missing"
                                                          : "is '" + it->second + "': " + what));
  };
  auto text = [&](const std::string &key) -> std::optional<std::string> {
    auto it = meta.find(key);
    if (it == meta.end() || it->second.empty())
      return std::nullopt;
    return it->second;
  };
  auto number = [&](const std::string &key, uint64_t min, uint64_t max,
                    auto &into) -> rt::Status {
    std::optional<uint64_t> value = parseDecimal(meta.count(key) ? meta.at(key) : "", max);
    if (!value || *value < min)
      return bad(key, fmt::format("not a decimal integer from {} to {}", min, max));
    into = std::remove_reference_t<decltype(into)>(*value);
    return rt::Status();
  };

  if (text("format") != kCheckpointFormat)
    return bad("format", std::string("not ") + kCheckpointFormat +
                             (text("format") == "smelt-checkpoint-1"
                                  ? " (written by an older Smelt, without a checksum)"
                                  : ""));
  LoadedCheckpoint loaded;
  CheckpointInfo &info = loaded.info;
  if (!text("model"))
    return bad("model", "empty");
  info.model = *text("model");
  if (!text("precision") || !parsePrecisionPolicy(*text("precision")))
    return bad("precision", "not f32, mixed_bf16 or mixed_f16");
  info.precision = *text("precision");
  constexpr uint64_t kInt64Max = uint64_t(std::numeric_limits<int64_t>::max());
  for (rt::Status s : {number("epochs_done", 0, kInt64Max, info.epochsDone),
                       number("global_step", 0, kInt64Max, info.globalStep),
                       number("batch", 1, kInt64Max, info.batch),
                       number("seed", 0, std::numeric_limits<uint64_t>::max(), info.seed)})
    if (!s.ok())
      return s;
  std::string crc = tensorsCrc32(checkpoint->tensors);
  if (text("tensors_crc32") != crc)
    return bad("tensors_crc32", "the tensor bytes have CRC32 " + crc +
                                    ": the file is damaged");
  loaded.tensors = std::move(checkpoint->tensors);
  return loaded;
}

} // namespace smelt::train
