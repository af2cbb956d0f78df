// dlopen with fallbacks and symbol lookup for the CUDA libraries (DynamicLibrary.h).
#include "runtime/cuda/DynamicLibrary.h"

#include <fmt/format.h>

#include <dlfcn.h>

namespace smelt::rt::cuda {

Expected<void *> openDynamicLibrary(const std::string &name,
                                    std::initializer_list<const char *> paths) {
  std::string tried;
  for (const char *path : paths) {
    if (void *library = dlopen(path, RTLD_NOW | RTLD_LOCAL))
      return library;
    const char *why = dlerror();
    tried += fmt::format("{}dlopen(\"{}\"): {}", tried.empty() ? "" : "; ", path,
                         why ? why : "unknown reason");
  }
  return Status::error(fmt::format("no {} library: {}", name, tried));
}

Status resolveSymbol(void *library, void *&entry, const char *symbol, const char *file,
                     const char *why) {
  entry = dlsym(library, symbol);
  if (!entry)
    return Status::error(fmt::format("the {} library has no {}; {}", file, symbol, why));
  return Status();
}

} // namespace smelt::rt::cuda
