// Little-endian writer and bounds-checked cursor (ByteCodec.h). Bytes are assembled one by
// one, so the files read the same on any host, aligned or not.
#include "runtime/ByteCodec.h"

#include <fmt/format.h>

#include <bit>
#include <limits>

namespace smelt::rt {

uint64_t loadLE(const uint8_t *p, int width) {
  uint64_t v = 0;
  for (int i = 0; i < width; ++i)
    v |= uint64_t(p[i]) << (8 * i);
  return v;
}

void storeLE(uint8_t *p, uint64_t value, int width) {
  for (int i = 0; i < width; ++i)
    p[i] = uint8_t(value >> (8 * i));
}

void ByteWriter::le(uint64_t v, int width) {
  out_.resize(out_.size() + size_t(width));
  storeLE(out_.data() + out_.size() - width, v, width);
}

void ByteWriter::f64(double v) { u64(std::bit_cast<uint64_t>(v)); }

void ByteWriter::count(size_t n, std::string_view what) {
  if (n > std::numeric_limits<uint32_t>::max() && status_.ok())
    status_ =
        Status::error(fmt::format("{} is {} long; the format holds lengths up to 2^32-1", what, n));
  u32(uint32_t(n));
}

void ByteWriter::str(std::string_view v, std::string_view what) {
  count(v.size(), what);
  out_.insert(out_.end(), v.begin(), v.end());
}

void ByteWriter::blob(const std::vector<uint8_t> &v) {
  u64(v.size());
  raw(v);
}

void ByteWriter::i32s(const std::vector<int32_t> &v, std::string_view what) {
  count(v.size(), what);
  for (int32_t x : v)
    i32(x);
}

void ByteWriter::i64s(const std::vector<int64_t> &v, std::string_view what) {
  count(v.size(), what);
  for (int64_t x : v)
    i64(x);
}

void ByteWriter::align(size_t alignment) {
  out_.resize((out_.size() + alignment - 1) / alignment * alignment, 0);
}

void ByteCursor::fail(size_t at, const std::string &what) {
  if (status_.ok())
    status_ = Status::error(fmt::format("{}: {}, byte {}: {}", file_, part_, at, what));
}

bool ByteCursor::need(size_t n, std::string_view what) {
  if (!ok())
    return false;
  if (n <= remaining())
    return true;
  fail(at(), fmt::format("{} needs {} bytes but only {} remain before the {} ends at byte {}", what,
                         n, remaining(), part_, base_ + size_));
  return false;
}

uint64_t ByteCursor::le(int width, std::string_view what) {
  if (!need(size_t(width), what))
    return 0;
  uint64_t v = loadLE(data_ + pos_, width);
  pos_ += size_t(width);
  return v;
}

double ByteCursor::f64(std::string_view what) { return std::bit_cast<double>(u64(what)); }

std::string ByteCursor::str(std::string_view what) {
  uint32_t n = u32(what);
  if (!need(n, what))
    return {};
  std::string s(reinterpret_cast<const char *>(data_ + pos_), n);
  pos_ += n;
  return s;
}

std::vector<uint8_t> ByteCursor::blob(std::string_view what, bool keep) {
  uint64_t n = u64(what);
  // Compared with the bytes left before anything is allocated: a corrupt 2^63 fails here.
  if (n > remaining()) {
    if (ok())
      fail(at(), fmt::format("{} claims {} bytes but only {} remain before the {} ends at "
                             "byte {}",
                             what, n, remaining(), part_, base_ + size_));
    return {};
  }
  std::vector<uint8_t> v;
  if (keep)
    v.assign(data_ + pos_, data_ + pos_ + n);
  pos_ += size_t(n);
  return v;
}

uint32_t ByteCursor::count(std::string_view what, size_t minEntryBytes) {
  size_t where = at();
  uint32_t n = u32(what);
  if (ok() && uint64_t(n) * minEntryBytes > remaining()) {
    fail(where, fmt::format("{} claims {} entries, at least {} bytes, but only {} remain in "
                            "the {}",
                            what, n, uint64_t(n) * minEntryBytes, remaining(), part_));
    return 0;
  }
  return n;
}

std::vector<int64_t> ByteCursor::i64s(std::string_view what) {
  uint32_t n = count(what, 8);
  std::vector<int64_t> v(n);
  for (int64_t &x : v)
    x = i64(what);
  return v;
}

void ByteCursor::finish() {
  if (ok() && remaining() != 0)
    fail(at(), fmt::format("{} bytes follow the last field of the {}", remaining(), part_));
}

} // namespace smelt::rt
