// Where the CUDA source of a compiled module can be found again from the module's image alone:
// with $SMELT_CUDA_SOURCE_DIR set, every CUDA module codegen produces or loads (NVRTC, the JIT
// cache, an AOT artifact) leaves its source there as <SHA-256 of the CUBIN>.cu and <SHA-256 of
// the PTX>.cu. A reader of a driver trace finds the source of what was loaded; the emulated CUDA
// driver (tests/emucuda) finds the code it runs on the CPU (docs/emucuda.md).
#pragma once

#include "runtime/Executable.h"
#include "runtime/Status.h"

namespace smelt::codegen {

/// Writes `code.source` under both names when $SMELT_CUDA_SOURCE_DIR is set (creating the
/// folder); nothing otherwise. Each file is written whole or not at all (a rename), so
/// processes sharing the folder never read half of one. The error names the file.
rt::Status keepCudaSource(const rt::CudaCode &code);

} // namespace smelt::codegen
