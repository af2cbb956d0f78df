// Opening libcudnn and resolving its table (CudnnLibrary.h).
#include "runtime/cuda/CudnnLibrary.h"

#include "runtime/cuda/DynamicLibrary.h"

#include <dlfcn.h>

namespace smelt::rt::cuda {
namespace {

Expected<const CudnnLibrary *> openLibrary() {
  // Never closed, like the driver. Searched as DynamicLibrary.h says: SMELT_CUDA_LIBRARY_PATH,
  // a pip wheel's nvidia/cudnn/lib, the CUDA toolkit, then the loader's path.
  Expected<void *> opened = openCudaLibrary("cuDNN", "libcudnn.so.9");
  if (!opened)
    return opened.status();
  void *handle = *opened;
  static CudnnLibrary lib;
#define SMELT_CUDNN_RESOLVE(symbol, member)                                                        \
  if (Status s = resolveSymbol(handle, lib.member, #symbol, "libcudnn.so.9",                      \
                               "it is not the cuDNN 9 this program needs");                        \
      !s.ok())                                                                                     \
    return s;
  SMELT_CUDNN_ENTRIES(SMELT_CUDNN_RESOLVE)
#undef SMELT_CUDNN_RESOLVE
  lib.getLastErrorString = reinterpret_cast<decltype(lib.getLastErrorString)>(
      dlsym(handle, "cudnnGetLastErrorString"));
  lib.version = lib.getVersion();
  if (lib.version / 10000 != 9)
    return Status::error(fmt::format("libcudnn.so.9 reports version {}; this program needs 9.x",
                                     lib.version));
  return &lib;
}

} // namespace

const Expected<const CudnnLibrary *> &cudnnLibrary() {
  static const Expected<const CudnnLibrary *> lib = openLibrary(); // thread-safe, tried once
  return lib;
}

} // namespace smelt::rt::cuda
