// libFuzzer target for the safetensors (checkpoint) reader: any bytes give a checkpoint or an
// error naming the file, never a crash, a sanitizer report or an allocation beyond the file;
// a checkpoint that reads back is written again and must read back the same.
#include "FuzzFile.h"

#include "data/Safetensors.h"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace smelt;
  std::optional<data::Checkpoint> checkpoint =
      fuzz::readInput("safetensors_fuzz", data, size, ".safetensors", data::readSafetensors);
  if (!checkpoint)
    return 0;
  data::Checkpoint again =
      fuzz::writeAndReadBack("safetensors_fuzz", *checkpoint, ".safetensors",
                             data::writeSafetensors, data::readSafetensors);
  bool same = again.metadata == checkpoint->metadata &&
              again.tensors.size() == checkpoint->tensors.size();
  for (size_t i = 0; same && i < again.tensors.size(); ++i) {
    const rt::HostTensor &a = checkpoint->tensors[i].tensor, &b = again.tensors[i].tensor;
    same = again.tensors[i].name == checkpoint->tensors[i].name &&
           a.type().dtype == b.type().dtype && a.type().shape == b.type().shape &&
           std::memcmp(a.raw(), b.raw(), a.byteSize()) == 0;
  }
  if (!same)
    fuzz::failWith("safetensors_fuzz", "a write and read changed the checkpoint", "");
  return 0;
}
