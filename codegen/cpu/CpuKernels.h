// The CPU back end's entry point: smelt.fusion ops -> machine code in process (rt::CpuCode).
#pragma once

#include "ir/SmeltDialect.h"
#include "runtime/Executable.h"

#include "mlir/Support/LLVM.h"

#include <memory>
#include <string>

namespace smelt::codegen {

/// Compiles each fusion into a kernel named names[i] with rt::CpuKernelFn's ABI
/// (`void(void *const *args, int64_t begin, int64_t end)`, args = inputs then results) and
/// JIT-compiles them together; the result's entries follow `fusions`. A loop kernel's units
/// are result elements, a reduction's the reduces' result elements (rt::FusedKernel::units).
/// Errors are diagnostics at the fusion op they concern.
mlir::FailureOr<std::shared_ptr<const rt::CpuCode>>
compileCpuKernels(llvm::ArrayRef<FusionOp> fusions, llvm::ArrayRef<std::string> names);

} // namespace smelt::codegen
