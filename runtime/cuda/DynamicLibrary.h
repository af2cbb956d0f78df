// Finding and opening a CUDA library with dlopen, and resolving its table of symbols, for the
// libraries the runtime never links (cuBLASLt, cuDNN, NCCL; device discovery asks NVRTC's
// version the same way): binaries start without them, and a machine that lacks one, or has an
// old one, gets an error naming every file tried and the symbol.
#pragma once

#include "runtime/Status.h"

#include <dlfcn.h>

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

namespace smelt::rt::cuda {

/// Where a CUDA library is looked for, in this order (docs/gpu.md, "Where the CUDA libraries
/// come from"), listing only files that exist, except the bare soname, always last:
///   1. each directory D of SMELT_CUDA_LIBRARY_PATH (colon-separated): D/<soname>, then
///      D/nvidia/*/lib/<soname>, the layout `pip install --target D` gives NVIDIA's wheels
///      (scripts/setup.sh --cuda-wheels D): nvidia/cu13/lib for NVRTC and cuBLAS, nvidia/cudnn/lib,
///      nvidia/nccl/lib;
///   2. nvidia/*/lib/<soname> in Python's site-packages, where pip, JAX and PyTorch put the
///      same wheels: $VIRTUAL_ENV, $CONDA_PREFIX, ~/.local, /usr/local and /usr (lib/python3*),
///      then virtual environments under /opt that nobody activated (/opt/NAME, /opt/NAME/.venv,
///      /opt/NAME/venv);
///   3. the CUDA toolkit: /usr/local/cuda/lib64, /usr/local/cuda/lib, /usr/local/cuda-*/lib64;
///   4. <soname> alone: the loader's search (LD_LIBRARY_PATH, the binary's RUNPATH, ldconfig).
/// A file reached twice (lib64 a link to lib) is listed once. The toolkit comes before the
/// loader so that a stray older copy on LD_LIBRARY_PATH does not win over it; to choose a
/// copy, name its directory in SMELT_CUDA_LIBRARY_PATH. Tests give other `venvParents`, the
/// folders searched for unactivated virtual environments.
std::vector<std::string> cudaLibraryCandidates(const std::string &soname,
                                               const std::vector<std::string> &venvParents = {
                                                   "/opt"});

/// dlopens the first of cudaLibraryCandidates(soname) that loads. Never closed: the library
/// stays for the process, as if linked. The error lists every attempt:
/// "no cuDNN library: dlopen("/usr/local/cuda/lib64/libcudnn.so.9"): ...; dlopen(...): ...".
Expected<void *> openCudaLibrary(const std::string &name, const std::string &soname);

/// The file a handle from dlopen was loaded from (for `smelt devices` and the tests).
std::string loadedLibraryPath(void *library);

/// Sets `entry` to `symbol` in `library`, or says "the <file> library has no <symbol>; <why>".
template <typename Fn>
Status resolveSymbol(void *library, Fn &entry, const char *symbol, const char *file,
                     const char *why) {
  entry = reinterpret_cast<Fn>(dlsym(library, symbol));
  if (!entry)
    return Status::error(std::string("the ") + file + " library has no " + symbol + "; " + why);
  return Status();
}

/// A library's table of symbols: openCudaLibrary(name, soname), then each entry (where a
/// function pointer of the table goes, and the symbol's name) resolved, or resolveSymbol's
/// error for the first one missing, ending with `why`. The handle, for optional symbols.
Expected<void *> openCudaTable(const std::string &name, const std::string &soname,
                               std::initializer_list<std::pair<void **, const char *>> entries,
                               const char *why);
/// openCudaTable's entry for a line `X(symbol, member)` of a table's X-macro list: the member
/// of the caller's `table`.
#define SMELT_CUDA_TABLE_ENTRY(symbol, member) {reinterpret_cast<void **>(&table.member), #symbol},

} // namespace smelt::rt::cuda
