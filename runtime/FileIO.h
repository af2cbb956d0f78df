// Whole-file reads and atomic whole-file writes of bytes, with errors that name the path.
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smelt::rt {

/// Writes all of `bytes` to descriptor `fd`, retrying short writes; errors name `what`.
Status writeAll(int fd, const std::vector<uint8_t> &bytes, const std::string &what);

/// The bytes of the regular file at `path`.
Expected<std::vector<uint8_t>> readFileBytes(const std::string &path);

/// Replaces `path` atomically: a new temporary file beside it, fsync, rename, fsync of the
/// directory; a crash leaves the old file or the new one, never a torn one.
Status writeFileAtomically(const std::string &path, const std::vector<uint8_t> &bytes);

} // namespace smelt::rt
