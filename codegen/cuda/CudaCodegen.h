// The CUDA back end's entry points: render a module's (or one function's) fusions as one CUDA
// source, compile it with NVRTC, and report a failure as a diagnostic. Tests and the CUDA target
// (CudaBackEnd.cpp) call these; CudaRenderer.h and Nvrtc.h are the two halves underneath.
#pragma once

#include "ir/SmeltDialect.h"
#include "runtime/Executable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace smelt::codegen {

/// Renders `ops` (fusions and ops with a kernel of their own, op i as kernel kernels[i].name,
/// whose cudaBlock and cudaGrid it fills) and compiles them for `arch` ("sm_90": CUBIN and
/// PTX). On failure emits an error at the first op holding NVRTC's log and the numbered source.
/// No ops give empty code. `fmad`: compileWithNvrtc's.
mlir::FailureOr<rt::CudaCode> compileCudaKernels(llvm::ArrayRef<mlir::Operation *> ops,
                                                 std::vector<rt::FusedKernel> &kernels,
                                                 const std::string &arch = "sm_90",
                                                 bool fmad = true);

/// Every kernel of `function` (a function after the default pipeline: its fusions, and the ops
/// placed on a GPU with a kernel of their own), compiled; `kernels` are the entries
/// buildExecutable makes for them ("<function>_fusion<N>", launches filled).
struct CudaFunctionCode {
  rt::CudaCode code;
  std::vector<rt::FusedKernel> kernels;
};
mlir::FailureOr<CudaFunctionCode> compileCudaFunction(mlir::func::FuncOp function,
                                                      const std::string &arch = "sm_90",
                                                      bool fmad = true);

} // namespace smelt::codegen
