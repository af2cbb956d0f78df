// IDX reader over zlib's gz* API, which reads gzip and uncompressed files alike.
#include "data/Idx.h"

#include "runtime/FileIO.h"

#include <fmt/format.h>
#include <zlib.h>

#include <memory>

#include <unistd.h>

namespace smelt::data {

using namespace rt;

namespace {
struct GzCloser {
  void operator()(gzFile_s *f) const { gzclose(f); }
};
} // namespace

Expected<IdxArray> readIdx(const std::string &path) {
  // A directory, a FIFO or a device such as /dev/zero is refused before zlib reads from it.
  Expected<int> fd = openRegularFile(path);
  if (!fd)
    return fd.status();
  std::unique_ptr<gzFile_s, GzCloser> file(gzdopen(*fd, "rb"));
  if (!file) {
    ::close(*fd);
    return Status::error(fmt::format("{}: cannot open IDX file", path));
  }
  size_t offset = 0;
  // Reads exactly `size` bytes or reports how far the file went.
  auto readExact = [&](void *dst, size_t size, const char *what) -> Status {
    size_t got = 0;
    while (got < size) {
      unsigned chunk = unsigned(std::min<size_t>(size - got, 1u << 30));
      int n = gzread(file.get(), static_cast<uint8_t *>(dst) + got, chunk);
      if (n < 0) {
        int code;
        return Status::error(fmt::format("{}: read error at byte {} ({}): {}", path,
                                         offset + got, what, gzerror(file.get(), &code)));
      }
      if (n == 0)
        return Status::error(fmt::format("{}: truncated: {} needs {} bytes at byte offset {}, "
                                         "file ends after {}",
                                         path, what, size, offset, offset + got));
      got += size_t(n);
    }
    offset += size;
    return Status();
  };

  uint8_t magic[4];
  if (Status s = readExact(magic, 4, "the magic number"); !s.ok())
    return s;
  if (magic[0] != 0 || magic[1] != 0)
    return Status::error(fmt::format("{}: not an IDX file: magic bytes {:02x} {:02x} at offset "
                                     "0 should be 00 00",
                                     path, magic[0], magic[1]));
  if (magic[2] != 0x08)
    return Status::error(fmt::format("{}: IDX element type 0x{:02x} at offset 2 is not "
                                     "supported (only 0x08, unsigned byte)",
                                     path, magic[2]));
  int rank = magic[3];
  if (rank < 1 || rank > 4)
    return Status::error(
        fmt::format("{}: IDX dimension count {} at offset 3 is outside 1..4", path, rank));

  IdxArray array;
  size_t count = 1;
  for (int i = 0; i < rank; ++i) {
    uint8_t be[4];
    if (Status s = readExact(be, 4, "a dimension"); !s.ok())
      return s;
    uint32_t dim = uint32_t(be[0]) << 24 | uint32_t(be[1]) << 16 | uint32_t(be[2]) << 8 | be[3];
    if (dim == 0 || dim > (1u << 28) || count * dim > (size_t(1) << 34))
      return Status::error(fmt::format("{}: IDX dimension {} = {} at offset {} is not a "
                                       "plausible size",
                                       path, i, dim, offset - 4));
    array.dims.push_back(dim);
    count *= dim;
  }
  // The data grows as it arrives, a chunk at a time: the dims alone could claim 16 GiB from a
  // file of a few bytes (found by tests/fuzz/idx_fuzz.cpp), and a gzip file's size says nothing
  // of what it holds.
  constexpr size_t kChunk = size_t(1) << 24;
  for (size_t done = 0; done < count;) {
    size_t chunk = std::min(kChunk, count - done);
    array.data.resize(done + chunk);
    if (Status s = readExact(array.data.data() + done, chunk, "the data"); !s.ok())
      return s;
    done += chunk;
  }
  uint8_t extra;
  if (gzread(file.get(), &extra, 1) > 0)
    return Status::error(fmt::format("{}: {} bytes of data expected after the {}-byte header, "
                                     "but the file is longer",
                                     path, count, offset - count));
  return array;
}

} // namespace smelt::data
