// The CUDA back end's entry points: render a module's (or one function's) fusions as one CUDA
// source, compile it with NVRTC, and report a failure as a diagnostic. Tests and the executable
// builder call these; CudaRenderer.h and Nvrtc.h are the two halves underneath.
#pragma once

#include "codegen/Compile.h"
#include "ir/SmeltDialect.h"
#include "runtime/Executable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

#include <functional>
#include <string>
#include <vector>

namespace smelt::codegen {

/// Renders `fusions` (fusion i as kernel kernels[i].name, whose cudaBlock and cudaGrid it fills)
/// and compiles them for `arch` ("sm_90": CUBIN and PTX). On failure emits an error at the first
/// fusion holding NVRTC's log and the numbered source. No fusions give empty code.
mlir::FailureOr<rt::CudaCode> compileCudaKernels(llvm::ArrayRef<FusionOp> fusions,
                                                 std::vector<rt::FusedKernel> &kernels,
                                                 const std::string &arch = "sm_90");

/// Every fusion of `function` (a function after the default pipeline), compiled; `kernels`
/// are the entries buildExecutable makes for them ("<function>_fusion<N>", launches filled).
struct CudaFunctionCode {
  rt::CudaCode code;
  std::vector<rt::FusedKernel> kernels;
};
mlir::FailureOr<CudaFunctionCode> compileCudaFunction(mlir::func::FuncOp function,
                                                      const std::string &arch = "sm_90");

/// A CompileOptions::extend hook that compiles the function's fusions for `arch` into the
/// Executable's CUDA code (what the GPU executor loads), then calls `next` (the hook it
/// replaces, or null).
std::function<mlir::LogicalResult(mlir::func::FuncOp, rt::Executable &, CompileDump *)>
withCudaKernels(const std::string &arch,
                std::function<mlir::LogicalResult(mlir::func::FuncOp, rt::Executable &,
                                                  CompileDump *)>
                    next = nullptr);

} // namespace smelt::codegen
