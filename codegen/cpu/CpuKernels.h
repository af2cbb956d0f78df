// The CPU back end's entry points: smelt.fusion ops -> machine code in process (rt::CpuCode),
// or -> a shared library's bytes for an AOT artifact.
#pragma once

#include "ir/SmeltDialect.h"
#include "runtime/Executable.h"
#include "runtime/Trace.h"

#include "mlir/Support/LLVM.h"

#include <memory>
#include <string>
#include <vector>

namespace smelt::codegen {

/// Compiles each fusion into a kernel named names[i] with rt::CpuKernelFn's ABI
/// (`void(void *const *args, int64_t begin, int64_t end)`, args = inputs then results) and
/// JIT-links them into this process; the result's entries follow `fusions`. Equivalent fusions
/// share one kernel, and the kernels compile on the process's CPU threads (CpuKernels.cpp). A loop kernel's units
/// are result elements, a reduction's the reduces' result elements (rt::FusedKernel::units).
/// Errors are diagnostics at the fusion op they concern. The optimized LLVM IR goes to the
/// result's llvmIR with `keepLlvmIR`; `trace`, when given, gets a span for each phase on each
/// codegen thread.
mlir::FailureOr<std::shared_ptr<const rt::CpuCode>>
compileCpuKernels(llvm::ArrayRef<FusionOp> fusions, llvm::ArrayRef<std::string> names,
                  bool keepLlvmIR = true, rt::Trace *trace = nullptr);

/// The same kernels, built by the same pipeline, as the bytes of a shared library that exports
/// names[i] with rt::CpuKernelFn's ABI and needs only libc and libm (what rt::loadCpuObject
/// loads and rt::ArtifactExtras::cpuObject holds). `llvmIR`, when given, receives the optimized
/// IR. No fusions give no bytes. Needs the system's `c++` to link; its absence is a diagnostic
/// like any other failure.
mlir::FailureOr<std::vector<uint8_t>>
compileCpuSharedLibrary(llvm::ArrayRef<FusionOp> fusions, llvm::ArrayRef<std::string> names,
                        std::string *llvmIR = nullptr, rt::Trace *trace = nullptr);

} // namespace smelt::codegen
