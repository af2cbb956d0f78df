// Whole-file reads and atomic whole-file writes of bytes, with errors that name the path.
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace smelt::rt {

/// Writes all `size` bytes at `data` to descriptor `fd`, retrying short writes; errors name
/// `what`.
Status writeAll(int fd, const void *data, size_t size, const std::string &what);
Status writeAll(int fd, const std::vector<uint8_t> &bytes, const std::string &what);

/// The bytes of the regular file at `path`.
Expected<std::vector<uint8_t>> readFileBytes(const std::string &path);

/// Replaces `path` atomically: `writeContents` fills a new temporary file beside it (given its
/// descriptor and name, for messages), then fsync, rename, fsync of the directory; a crash
/// leaves the old file or the new one, never a torn one. Writers that stream (a checkpoint's
/// tensors) need not gather the whole file in memory first.
using FileWriter = std::function<Status(int fd, const std::string &tmp)>;
Status writeFileAtomically(const std::string &path, const FileWriter &writeContents);
Status writeFileAtomically(const std::string &path, const std::vector<uint8_t> &bytes);

} // namespace smelt::rt
