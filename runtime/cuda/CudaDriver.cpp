// Opens libcuda with dlopen and resolves the driver table (CudaDriver.h), once per process.
#include "runtime/cuda/CudaDriver.h"

#include "runtime/cuda/DynamicLibrary.h"

#include <string>

namespace smelt::rt::cuda {

Expected<const CudaDriver *> CudaDriver::get() {
  // Thread-safe, tried once.
  static const Expected<const CudaDriver *> driver = []() -> Expected<const CudaDriver *> {
    // Found as the CUDA libraries are (DynamicLibrary.h): a folder in SMELT_CUDA_LIBRARY_PATH
    // comes first, so a test can name the emulated driver (tests/emucuda); otherwise the
    // loader's search finds the system's. Never closed, as if linked.
    static CudaDriver table;
    SMELT_RETURN_IF_ERROR(openCudaTable("CUDA driver", "libcuda.so.1",
                                        {SMELT_CUDA_DRIVER_ENTRIES(SMELT_CUDA_TABLE_ENTRY)},
                                        "it is older than this program needs")
                              .status());
    SMELT_RETURN_IF_ERROR(table.check(table.init(0), "cuInit"));
    return &table;
  }();
  return driver;
}

Status CudaDriver::check(CUresult result, const char *call) const {
  if (result == CUDA_SUCCESS)
    return {};
  // Both set the pointer to null (and fail) for a code they do not know: the null is the check.
  const char *name = nullptr, *description = nullptr;
  getErrorName(result, &name);
  getErrorString(result, &description);
  return Status::error(std::string(call) + " failed: " +
                       (name ? std::string(name) : "CUDA error " + std::to_string(int(result))) +
                       " (" + (description ? description : "no description") + ")");
}

} // namespace smelt::rt::cuda
