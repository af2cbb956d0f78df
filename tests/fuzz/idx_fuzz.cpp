// libFuzzer target for the IDX reader (plain and gzip, through zlib): any bytes give an array
// whose data has the dims' element count, or an error naming the file; never a crash, a
// sanitizer report, a hang or an allocation the file's contents do not back.
#include "FuzzFile.h"

#include "data/Idx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace smelt;
  std::optional<data::IdxArray> array =
      fuzz::readInput("idx_fuzz", data, size, ".idx", data::readIdx);
  if (!array)
    return 0;
  size_t count = 1;
  for (int64_t dim : array->dims)
    count *= size_t(dim);
  if (array->dims.empty() || array->data.size() != count)
    fuzz::failWith("idx_fuzz", "the data does not match the dims", "");
  return 0;
}
