// A back end of codegen: it compiles the kernels placed on its kind of device (fusions, and the
// argmax and scatter_add ops with a GPU kernel of their own) into an Executable's code.
// compile() (Compile.cpp) holds one per device kind, the CPU always and CUDA where its back end
// is built, and gives each only the kernels placed on its devices.
#pragma once

#include "codegen/CompileDump.h"
#include "ir/SmeltDialect.h"
#include "runtime/Executable.h"
#include "runtime/Trace.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace smelt::codegen {

/// What every target is asked to compile for (compile() fills it from CompileOptions).
struct TargetOptions {
  /// The CUDA arch ("sm_90") of the fusions placed on a GPU; "" compiles them for the CPU
  /// instead (there is no other code for them then).
  std::string cudaArch;
  /// NVRTC may contract multiply-adds into FMAs (CompileOptions::cudaFmad).
  bool cudaFmad = true;
  /// The CPU compiles the GPU's fusions too, so the Executable also runs where there is no
  /// GPU: what AOT artifacts for CUDA carry.
  bool hostFallback = false;
  /// Where the CPU target puts its kernels as a shared library for an artifact (null: JIT).
  std::vector<uint8_t> *cpuObject = nullptr;
  rt::Trace *trace = nullptr;
  /// The CPU target keeps its optimized LLVM IR in rt::CpuCode::llvmIR (dumps and tests read
  /// it; printing it is a few percent of a compile).
  bool keepLlvmIR = true;
};

class Target {
public:
  virtual ~Target();
  /// "cpu" or "cuda", for messages and profiles.
  virtual llvm::StringRef name() const = 0;
  /// Whether it compiles the kernels of fusions placed on `device` ("cpu:0", "gpu:1").
  virtual bool compilesFor(llvm::StringRef device, const TargetOptions &options) const = 0;
  /// Compiles `ops` (fusions, and ops with a kernel of their own: kernelOpsInOrder), whose
  /// kernels are exe.kernels[kernels[i]], into `exe`'s code for this target (called even with
  /// none, so a dump can show what the target would make). Errors are diagnostics.
  virtual mlir::LogicalResult compile(mlir::func::FuncOp function,
                                      llvm::ArrayRef<mlir::Operation *> ops,
                                      llvm::ArrayRef<size_t> kernels, const TargetOptions &options,
                                      rt::Executable &exe, CompileDump *dump) = 0;
};

/// The CPU target (codegen/cpu): LLVM, JIT-compiled or as a shared library.
std::unique_ptr<Target> createCpuTarget();
/// The CUDA target (codegen/cuda): CUDA C++ through NVRTC; only where that back end is built.
std::unique_ptr<Target> createCudaTarget();

} // namespace smelt::codegen
