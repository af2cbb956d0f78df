// Checkpoints in the safetensors format (readable by the Python `safetensors` package):
// an 8-byte little-endian header length, a JSON header, then the raw tensor bytes.
#pragma once

#include "runtime/HostTensor.h"
#include "runtime/Status.h"

#include <map>
#include <string>
#include <vector>

namespace smelt::data {

using rt::Expected;
using rt::HostTensor;
using rt::Status;

struct NamedTensor {
  std::string name;
  HostTensor tensor;
};

struct Checkpoint {
  std::vector<NamedTensor> tensors; // in file order
  std::map<std::string, std::string> metadata;
};

/// Writes atomically: a temporary file beside `path`, fsync, rename, fsync of the directory;
/// a crash leaves the old checkpoint or the new one, never a torn file.
Status writeSafetensors(const std::string &path, const Checkpoint &checkpoint);

/// Reads and checks a safetensors file: header length and JSON, dtypes, shapes against byte
/// ranges, ranges inside the file and not overlapping. Errors name the file and the tensor.
Expected<Checkpoint> readSafetensors(const std::string &path);

} // namespace smelt::data
