// Compile entry points shared by the tools, tests and examples: load a module, run the default
// pipeline, build the Executable of one function.
#pragma once

#include "passes/Passes.h"
#include "runtime/Executable.h"
#include "runtime/Trace.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <cstdint>
#include <string>
#include <vector>

namespace smelt::codegen {

/// Loads the dialects a smelt module uses (smelt, func) into `context`.
void loadDialects(mlir::MLIRContext &context);

/// Parses and verifies the .mlir file at `path`; diagnostics go to the context's handler (the
/// tools print them as "file:line:col: error: ..."). Null on failure, and for a path that is
/// not a regular file (a directory, a FIFO, /dev/zero).
mlir::OwningOpRef<mlir::ModuleOp> parseModuleFile(mlir::MLIRContext &context,
                                                  llvm::StringRef path);

class CompileDump;

struct CompileOptions {
  PipelineOptions pipeline;
  /// --dump-dir: IR after each pass, fusion report, graph, kernels (CompileDump.h).
  std::string dumpDir;
  /// When set, receives the directory the dump went to (dumpDir/<function>-<N>).
  std::string *dumpWrittenTo = nullptr;
  /// --profile: each pass, the pipeline and the LLVM JIT become spans on the compiler track.
  rt::Trace *trace = nullptr;
  /// The CUDA arch ("sm_90") the fusions placed on a GPU are compiled for, by the CUDA target
  /// where that back end is built; "" compiles them for the CPU. A dump with an arch also holds
  /// the CUDA source and PTX of every fusion.
  std::string cudaArch;
  /// NVRTC contracts a multiply and an add into one fused multiply-add, rounded once (on by
  /// default, as in XLA and PyTorch; `smelt train --deterministic` and --cuda-fmad=false turn
  /// it off). The CPU kernels never contract, so on, GPU fusions differ from them in the last
  /// bits of each a*b+c (docs/ops.md, "GPU numerics"); off, they round as the CPU does.
  bool cudaFmad = true;
  /// The CPU compiles the GPU's fusions too, so the Executable also runs where there is no GPU
  /// (what CUDA artifacts carry).
  bool hostFallback = false;
  /// When set, the CPU's kernels are compiled ahead of time instead of JIT-compiled: linked
  /// into a shared library whose bytes land here (empty when there are no kernels) and which
  /// the Executable runs, loaded with rt::loadCpuObject. What AOT artifacts carry.
  std::vector<uint8_t> *cpuObject = nullptr;
};

/// Runs the default pipeline on a copy of `module` (the caller's module and its builder
/// handles stay as they are, so a graph can be compiled again, for another function or with
/// other options) and builds the Executable of function `entry`, each fused kernel compiled by
/// the target of the device it is placed on (codegen/Target.h). Empty `entry` picks "main", or the only function when there is one. Errors
/// are diagnostics.
mlir::FailureOr<rt::Executable> compile(mlir::ModuleOp module, llvm::StringRef entry,
                                        const CompileOptions &options);
mlir::FailureOr<rt::Executable> compile(mlir::ModuleOp module, llvm::StringRef entry = "",
                                        const PipelineOptions &options = {});

/// The Executable of `function` as it stands (no pipeline): buildExecutable, then all its
/// smelt.fusion kernels JIT-compiled for the CPU into `cpu`. Tests and benchmarks that write
/// their fusions by hand call it directly.
mlir::FailureOr<rt::Executable> buildWithKernels(mlir::func::FuncOp function);

/// The function `compile` would pick, or null with a diagnostic naming the choices.
mlir::func::FuncOp findEntry(mlir::ModuleOp module, llvm::StringRef entry);

} // namespace smelt::codegen
