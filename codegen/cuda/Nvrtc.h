// NVRTC's compile boundary: CUDA C++ source in, PTX and CUBIN out, as plain data (tinygrad's
// NVRTCCompiler.compile). No MLIR here: a failed compile is a message holding NVRTC's log and
// the numbered source, which the caller turns into a diagnostic.
#pragma once

#include "runtime/Executable.h"
#include "runtime/Status.h"

#include <string>

namespace smelt::codegen {

/// Compiles `source` for `arch`: a real architecture ("sm_90") gives CUBIN and the PTX it was
/// made from (one NVRTC compile gives both), a virtual one ("compute_90") PTX only. `fmad`
/// lets NVRTC contract a multiply and an add into one fused multiply-add (--fmad, NVRTC's
/// default): faster, rounded once instead of twice, so results differ from the CPU kernels'
/// (which never contract) in the last bits; off, each product and sum is rounded as there.
rt::Expected<rt::CudaCode> compileWithNvrtc(const std::string &source,
                                            const std::string &arch = "sm_90", bool fmad = true);

/// NVRTC's version, "13.0".
std::string nvrtcVersionString();

/// The folder holding cuda_fp16.h, which NVRTC needs on its include path: $SMELT_CUDA_INCLUDE,
/// else $CUDA_HOME/include, else $CUDA_PATH/include, else D/nvidia/cu13/include for each D of
/// $SMELT_CUDA_LIBRARY_PATH (the nvidia-cuda-runtime wheel that scripts/setup.sh --cuda-wheels
/// installs there), else the toolkit CMake found. An error lists the places tried.
rt::Expected<std::string> cudaIncludeDir();

} // namespace smelt::codegen
