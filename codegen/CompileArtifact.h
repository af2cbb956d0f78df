// AOT compilation: one function of a module compiled into what an artifact holds (runtime/
// Artifact.h): the Executable with its CPU kernels as a shared library, and the extras that say
// which target it is for. `smelt compile` writes it to a file; the JIT cache writes it under its
// key.
#pragma once

#include "codegen/Compile.h"
#include "runtime/Artifact.h"

#include <string>

namespace smelt::codegen {

struct CompiledArtifact {
  /// Runnable here: its CPU code is the library in `extras`, already loaded.
  rt::Executable executable;
  rt::ArtifactExtras extras;
};

/// compile() with the CPU kernels built ahead of time (CompileOptions::cpuObject). `target` is
/// "cpu" or "cuda:<arch>": the latter compiles the GPU's kernels for the arch and the CPU's code
/// for every kernel (a host fallback), so the artifact runs with or without a GPU. Errors are
/// diagnostics.
mlir::FailureOr<CompiledArtifact> compileArtifact(mlir::ModuleOp module, llvm::StringRef entry,
                                                  CompileOptions options,
                                                  const std::string &target);

/// The producer string artifacts carry.
inline constexpr const char *kProducer = "smelt 0.1";

} // namespace smelt::codegen
