// libFuzzer target for the AOT artifact reader: any bytes give an artifact or a Status that
// names the input, never a crash, a sanitizer report or an allocation beyond the input's size;
// and whatever reads back encodes again, to bytes that read back to the same encoding.
// Checksums would stop nearly every mutation at the CRC check, so each input is also read with
// its checksums recomputed, which lets mutations reach the decoding of every section. CPU code
// that passes its ELF checks is loaded, as `smelt run` would (elf_fuzz.cpp goes deeper there).
#include "runtime/Artifact.h"
#include "runtime/CpuObject.h"
#include "tests/unit/runtime/ArtifactEdit.h"

#include <cstdio>
#include <cstdlib>

namespace {

[[noreturn]] void failWith(const char *what, const std::string &message) {
  std::fprintf(stderr, "artifact_fuzz: %s: %s\n", what, message.c_str());
  std::abort();
}

void readOne(const std::vector<uint8_t> &bytes) {
  using namespace smelt::rt;
  Expected<LoadedArtifact> loaded = decodeArtifact(bytes, "fuzz.smelt");
  if (!loaded.ok()) {
    if (loaded.message().rfind("fuzz.smelt: ", 0) != 0)
      failWith("an error that does not name the file", loaded.message());
    return;
  }
  if (!loaded->extras.cpuObject.empty())
    (void)loadCpuObject(loaded->extras.cpuObject, loaded->extras.cpuSymbols);
  Expected<std::vector<uint8_t>> again = encodeArtifact(loaded->executable, loaded->extras);
  if (!again.ok())
    failWith("accepted but not encodable", again.message());
  Expected<LoadedArtifact> reread = decodeArtifact(*again, "fuzz-again.smelt");
  if (!reread.ok())
    failWith("encoded but not readable", reread.message());
  Expected<std::vector<uint8_t>> third = encodeArtifact(reread->executable, reread->extras);
  if (!third.ok() || *third != *again)
    failWith("encoding is not stable", third.ok() ? "different bytes" : third.message());
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> bytes(data, data + size);
  readOne(bytes);
  smelt::rt::test::reseal(bytes);
  readOne(bytes);
  return 0;
}
