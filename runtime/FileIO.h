// Whole-file reads and maps, and atomic whole-file writes of bytes, with errors that name the
// path.
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace smelt::rt {

/// Writes all `size` bytes at `data` to descriptor `fd`, retrying short writes; errors name
/// `what`.
Status writeAll(int fd, const void *data, size_t size, const std::string &what);
Status writeAll(int fd, const std::vector<uint8_t> &bytes, const std::string &what);
/// Reads `size` bytes at file offset `offset` of descriptor `fd` into `data`, retrying short
/// reads; errors name `what` and the byte, and the end of the file is one.
Status readAll(int fd, void *data, size_t size, uint64_t offset, const std::string &what);

/// Success when `path` names a regular file (after symbolic links); otherwise an error naming
/// it and what it is instead ("is a directory", "is a FIFO" ...). Asks stat(), so a FIFO with
/// no writer or a device such as /dev/zero is refused without being opened.
Status checkRegularFile(const std::string &path);

/// Success when writeFileAtomically may replace `path`: nothing is there, or a regular file.
/// Tools ask before long work, so that a mistyped output path fails at once.
Status checkReplaceable(const std::string &path);

/// A file a command reads or writes, and the flag or argument that names it (for messages).
struct NamedFile {
  std::string what; // "-o", "--weights-out", "the model"
  std::string path; // empty: not given
};
/// Success when no two of `files` are the same file: by device and inode where both exist (a
/// symbolic link, a hard link or another spelling of a path is the same file), else by the real
/// path of the folder and the name. Tools ask before writing, so that an output named like the
/// input or like another output is an error instead of lost data.
Status checkDistinctFiles(const std::vector<NamedFile> &files);

/// A read-only descriptor (the caller closes it) of the regular file at `path`; anything else
/// is an error naming the file, found without blocking on a FIFO or reading a device. Readers
/// that stream (the IDX reader through zlib) start here. `size`, when given, gets the file's size
/// from the same check.
Expected<int> openRegularFile(const std::string &path, uint64_t *size = nullptr);

/// The bytes of the regular file at `path`. Anything else (a directory, a FIFO, /dev/zero) is
/// an error naming the file, never a hang or an endless read.
Expected<std::vector<uint8_t>> readFileBytes(const std::string &path);

/// A file's bytes mapped read-only, and what keeps the mapping. The pages are the page cache's,
/// shared by every process that maps the file and read from disk as they are touched. Replacing
/// the file by rename (as every writer here does) leaves a mapping whole; truncating it in place
/// under a process that maps it does not (SIGBUS), as for a loaded shared library.
struct MappedBytes {
  std::shared_ptr<const void> owner;
  std::span<const uint8_t> bytes;
};
/// Maps the first `size` bytes of descriptor `fd`, a regular file's (none: no mapping); errors
/// name `what`. The descriptor may be closed after.
Expected<MappedBytes> mapDescriptor(int fd, size_t size, const std::string &what);
/// Maps the regular file at `path`; anything else is an error naming it, as for readFileBytes.
Expected<MappedBytes> mapFile(const std::string &path);

/// Replaces `path` atomically: `writeContents` fills a new temporary file beside it (given its
/// descriptor and name, for messages), then fsync, rename, fsync of the directory; a crash
/// leaves the old file or the new one, never a torn one. Writers that stream (a checkpoint's
/// tensors) need not gather the whole file in memory first. Every write, fsync and close is
/// checked. Something at `path` that is not a regular file (a device such as /dev/full, a
/// directory, a FIFO) is refused, not replaced. After a successful rename, temporaries of
/// `path` that killed writers left behind (`<path>.tmp.<pid>.<n>` of a process that no longer
/// exists) are removed.
using FileWriter = std::function<Status(int fd, const std::string &tmp)>;
Status writeFileAtomically(const std::string &path, const FileWriter &writeContents);
Status writeFileAtomically(const std::string &path, const std::vector<uint8_t> &bytes);

} // namespace smelt::rt
