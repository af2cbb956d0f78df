// Reader of IDX files, the format of (Fashion-)MNIST, plain or gzip-compressed.
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smelt::data {

using rt::Expected;
using rt::Status;

/// An IDX file's unsigned-byte payload and its dimensions ([count, rows, cols] for images,
/// [count] for labels).
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;
};

/// Reads `path` (gzip or plain). Checks the magic (0x0000 then type 0x08 = ubyte), the
/// dimension count, that the payload holds exactly the product of the dimensions; every error
/// names the file and, for truncation, the byte offset.
Expected<IdxArray> readIdx(const std::string &path);

} // namespace smelt::data
