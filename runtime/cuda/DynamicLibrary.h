// Finding and opening a CUDA library with dlopen, and resolving its table of symbols, for the
// libraries the runtime never links (cuBLASLt, cuDNN, NCCL; device discovery asks NVRTC's
// version the same way): binaries start without them, and a machine that lacks one, or has an
// old one, gets an error naming every file tried and the symbol.
#pragma once

#include "runtime/Status.h"

#include <string>
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
/// copy, name its directory in SMELT_CUDA_LIBRARY_PATH.
std::vector<std::string> cudaLibraryCandidates(const std::string &soname);
/// The same with the folders searched for unactivated virtual environments given ({"/opt"}
/// above): for tests.
std::vector<std::string> cudaLibraryCandidates(const std::string &soname,
                                               const std::vector<std::string> &venvParents);

/// dlopens the first of cudaLibraryCandidates(soname) that loads. Never closed: the library
/// stays for the process, as if linked. The error lists every attempt:
/// "no cuDNN library: dlopen("/usr/local/cuda/lib64/libcudnn.so.9"): ...; dlopen(...): ...".
Expected<void *> openCudaLibrary(const std::string &name, const std::string &soname);

/// The file a handle from dlopen was loaded from (for `smelt devices` and the tests).
std::string loadedLibraryPath(void *library);

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
