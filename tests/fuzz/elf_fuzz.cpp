// libFuzzer target for the checks of an artifact's CPU code (runtime/ElfImage.h): any bytes are
// refused with a message, or pass and then load (dlopen from memory) without a crash, a
// sanitizer report or a hang. Loading runs none of the image's code, since the checks refuse
// constructors, so a crash here is a check the loader needed and ElfImage.cpp missed.
#include "runtime/CpuObject.h"
#include "runtime/ElfImage.h"

#include <cstdio>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace smelt::rt;
  std::vector<uint8_t> image(data, data + size);
  Status checked = checkElfImage(image);
  if (!checked.ok()) {
    if (checked.message().rfind("the CPU code's ELF image, byte ", 0) != 0) {
      std::fprintf(stderr, "elf_fuzz: an error that does not name the byte: %s\n",
                   checked.message().c_str());
      std::abort();
    }
    return 0;
  }
  // The seeds' kernel symbols; a mutated image may have lost them, which is an error, not a
  // crash. The executor would call the kernels: what they do is the trust model's part.
  (void)loadCpuObject(image, {"main_fusion0", "smelt_test_square"});
  return 0;
}
