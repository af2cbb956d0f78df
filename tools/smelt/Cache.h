// The JIT cache flags of the subcommands that compile and run or write code (run, compile, bench,
// train): they compile through the on-disk cache (codegen/JitCache.h) by default, `--no-cache`
// compiles afresh and writes nothing to disk, `--verbose-cache` says on stderr what the cache
// found and why a miss missed. `smelt dump` takes neither: what it writes is the compile itself,
// so it always compiles and never reads or writes the cache.
#pragma once

#include "codegen/JitCache.h"

#include "llvm/Support/CommandLine.h"

#include <memory>
#include <string>

namespace smelt::tools {

/// Made in each command's own file, as DeviceFlags are (Placement.h).
struct CacheFlags {
  explicit CacheFlags(llvm::cl::SubCommand &command);
  llvm::cl::opt<bool> noCache, verbose;

  /// Options compiling with `compile` for `target` ("cpu", "cuda:<arch>"). `inspecting`: the
  /// command asked to see the compile (--dump-dir, --profile, --log-device-placement), which a
  /// hit would skip, so it compiles again and replaces the entry.
  codegen::JitOptions options(const codegen::CompileOptions &compile, const std::string &target,
                              bool inspecting) const;
};

/// Function `entry` of `module` through a JitCache made with `options`, with what an artifact
/// holds beside the Executable; failure after printing the diagnostics. `cacheHit`, when given,
/// says whether the cache held it (nothing was compiled).
mlir::FailureOr<std::shared_ptr<const codegen::CompiledArtifact>>
compileCached(mlir::ModuleOp module, llvm::StringRef entry, const codegen::JitOptions &options,
              bool *cacheHit = nullptr);

} // namespace smelt::tools
