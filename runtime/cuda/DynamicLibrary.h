// Opening a CUDA library with dlopen and resolving its table of symbols, for the libraries the
// runtime never links (cuBLASLt, cuDNN, NCCL): binaries start without them, and a machine
// that lacks one, or has an old one, gets an error naming the file and the symbol.
#pragma once

#include "runtime/Status.h"

#include <initializer_list>
#include <string>

namespace smelt::rt::cuda {

/// The first of `paths` that dlopen loads (the loader's search first, LD_LIBRARY_PATH and a
/// pip wheel's nvidia/*/lib included, then the CUDA toolkit's folders). Never closed: the
/// library stays for the process, as if linked. The error lists every attempt:
/// "no cuDNN library: dlopen("libcudnn.so.9"): ...; dlopen(...): ...".
Expected<void *> openDynamicLibrary(const std::string &name,
                                    std::initializer_list<const char *> paths);

/// Sets `entry` to `symbol` in `library`, or says "the <file> library has no <symbol>; <why>".
Status resolveSymbol(void *library, void *&entry, const char *symbol, const char *file,
                     const char *why);

template <typename Fn>
Status resolveSymbol(void *library, Fn &entry, const char *symbol, const char *file,
                     const char *why) {
  void *address = nullptr;
  Status status = resolveSymbol(library, address, symbol, file, why);
  entry = reinterpret_cast<Fn>(address);
  return status;
}

} // namespace smelt::rt::cuda
