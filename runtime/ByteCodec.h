// Little-endian byte encoding for binary files: a writer that appends, and a bounds-checked
// cursor over one part of a file whose errors name the file, the part and the byte.
#pragma once

#include "runtime/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace smelt::rt {

/// The `width` (1 to 8) bytes at `p` as a little-endian integer, and the reverse.
uint64_t loadLE(const uint8_t *p, int width);
void storeLE(uint8_t *p, uint64_t value, int width);

/// Appends little-endian integers, IEEE doubles (by their bits), strings (u32 length, then the
/// bytes, no terminator), blobs (u64 length, then the bytes) and lists (u32 count, then the
/// elements). A string or list too long for its u32 length is remembered and reported by
/// status(), so encoding code needs no checks of its own.
class ByteWriter {
public:
  explicit ByteWriter(std::vector<uint8_t> &out) : out_(out) {}
  void u8(uint8_t v) { le(v, 1); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void i32(int32_t v) { u32(uint32_t(v)); }
  void i64(int64_t v) { u64(uint64_t(v)); }
  void f64(double v);
  void str(std::string_view v, std::string_view what);
  void blob(const std::vector<uint8_t> &v);
  /// The bytes alone, no length.
  void raw(const std::vector<uint8_t> &v) { out_.insert(out_.end(), v.begin(), v.end()); }
  void raw(const uint8_t *data, size_t size) { out_.insert(out_.end(), data, data + size); }
  void i32s(const std::vector<int32_t> &v, std::string_view what);
  void i64s(const std::vector<int64_t> &v, std::string_view what);
  /// A u32 count; remembers an error when `n` does not fit.
  void count(size_t n, std::string_view what);
  /// Zero bytes up to the next multiple of `alignment`.
  void align(size_t alignment);
  size_t size() const { return out_.size(); }
  Status status() const { return status_; }

private:
  void le(uint64_t v, int width);
  std::vector<uint8_t> &out_;
  Status status_;
};

/// Reads one part of a file (a section's payload). Every read is bounds-checked; the first
/// failure is kept and later reads return zeros and empty values, so decoding code reads
/// straight through and tests ok() only where it loops or keeps a value. Messages read
/// "<file>: <part>, byte <N>: <what>", N counted from the start of the file.
class ByteCursor {
public:
  ByteCursor(std::string file, std::string part, const uint8_t *data, size_t size,
             size_t fileOffset)
      : file_(std::move(file)), part_(std::move(part)), data_(data), size_(size),
        base_(fileOffset) {}

  bool ok() const { return status_.ok(); }
  Status status() const { return status_; }
  /// File offset of the next byte to read.
  size_t at() const { return base_ + pos_; }
  size_t remaining() const { return size_ - pos_; }
  /// Records an error at file offset `at` (the first one wins).
  void fail(size_t at, const std::string &what);

  uint8_t u8(std::string_view what) { return uint8_t(le(1, what)); }
  uint32_t u32(std::string_view what) { return uint32_t(le(4, what)); }
  uint64_t u64(std::string_view what) { return le(8, what); }
  int32_t i32(std::string_view what) { return int32_t(u32(what)); }
  int64_t i64(std::string_view what) { return int64_t(u64(what)); }
  double f64(std::string_view what);
  std::string str(std::string_view what);
  /// A u64 length and that many bytes; with keep false the bytes are skipped, not copied.
  std::vector<uint8_t> blob(std::string_view what, bool keep = true);
  /// A u32 count of entries of at least `minEntryBytes` each, checked against the bytes left,
  /// so a corrupt count fails here instead of driving a huge allocation or a long loop.
  uint32_t count(std::string_view what, size_t minEntryBytes);
  std::vector<int64_t> i64s(std::string_view what);
  /// Fails unless every byte of the part was read.
  void finish();

private:
  /// The next `width` bytes as a little-endian integer, or 0 past the end.
  uint64_t le(int width, std::string_view what);
  /// Whether `n` more bytes exist; records a truncation error naming `what` if not.
  bool need(size_t n, std::string_view what);
  std::string file_, part_;
  const uint8_t *data_;
  size_t size_, pos_ = 0, base_;
  Status status_;
};

} // namespace smelt::rt
