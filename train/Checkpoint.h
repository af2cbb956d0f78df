// A training run's checkpoint: its tensors in a safetensors file, with metadata (format, model,
// precision, progress) checked field by field on load and a CRC32 of the tensor bytes that a
// load verifies, so that a damaged or hand-edited file is refused instead of resumed.
#pragma once

#include "data/Safetensors.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smelt::train {

/// What a checkpoint says about the run that wrote it.
struct CheckpointInfo {
  std::string model, precision;
  int64_t epochsDone = 0, globalStep = 0, batch = 1;
  uint64_t seed = 0;
};

/// The format name save writes and load requires ("smelt-checkpoint-2": 1 had no checksum).
extern const char kCheckpointFormat[];

/// Writes `tensors` (in this order) and `info` atomically, with the tensors' CRC32.
rt::Status saveCheckpoint(const std::string &path, std::vector<data::NamedTensor> tensors,
                          const CheckpointInfo &info);

struct LoadedCheckpoint {
  CheckpointInfo info;
  std::vector<data::NamedTensor> tensors;
};

/// Whether a safetensors file's metadata is a training checkpoint's (the model it trains and its
/// tensors' checksum, as saveCheckpoint writes them) rather than bare weights.
bool isCheckpoint(const data::Checkpoint &file);

/// Reads a checkpoint written by saveCheckpoint. Every error names the file, and the field
/// where one is wrong: a format other than kCheckpointFormat, a number that is not a plain
/// non-negative decimal in range ("-5", "0x10", "1e3"), a missing field, or tensor bytes whose
/// CRC32 differs from the one recorded.
rt::Expected<LoadedCheckpoint> loadCheckpoint(const std::string &path);

} // namespace smelt::train
