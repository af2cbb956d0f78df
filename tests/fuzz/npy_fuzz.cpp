// libFuzzer target for the .npy reader: any bytes give a tensor or an error naming the file,
// never a crash, a sanitizer report or a hang; a tensor that reads back is written again and
// must read back to the same type and bytes.
#include "FuzzFile.h"

#include "data/Npy.h"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace smelt;
  std::optional<rt::HostTensor> tensor =
      fuzz::readInput("npy_fuzz", data, size, ".npy", data::readNpy);
  if (!tensor)
    return 0;
  rt::HostTensor again =
      fuzz::writeAndReadBack("npy_fuzz", *tensor, ".npy", data::writeNpy, data::readNpy);
  if (again.type().dtype != tensor->type().dtype || again.type().shape != tensor->type().shape ||
      std::memcmp(again.raw(), tensor->raw(), tensor->byteSize()) != 0)
    fuzz::failWith("npy_fuzz", "a write and read changed the tensor", "");
  return 0;
}
