// The JIT cache flags shared by the subcommands that compile (Cache.h).
#include "tools/smelt/Cache.h"

#include "tools/smelt/Commands.h"

namespace smelt::tools {

CacheFlags::CacheFlags(llvm::cl::SubCommand &command)
    : noCache("no-cache",
              llvm::cl::desc("Compile afresh and write nothing to the JIT cache on disk "
                             "($SMELT_CACHE_DIR, else $XDG_CACHE_HOME/smelt, else "
                             "~/.cache/smelt), which is used by default"),
              llvm::cl::sub(command), llvm::cl::cat(smeltCategory())),
      verbose("verbose-cache",
              llvm::cl::desc("Say on stderr whether the JIT cache held the function (in memory "
                             "or on disk) and, when it did not, which part of its key changed"),
              llvm::cl::sub(command), llvm::cl::cat(smeltCategory())) {}

codegen::JitOptions CacheFlags::options(const codegen::CompileOptions &compile,
                                        const std::string &target, bool inspecting) const {
  codegen::JitOptions options;
  options.diskCache = !noCache;
  options.verbose = verbose;
  options.target = target;
  options.refresh = inspecting;
  options.compile = compile;
  return options;
}

mlir::FailureOr<std::shared_ptr<const codegen::CompiledArtifact>>
compileCached(mlir::ModuleOp module, llvm::StringRef entry, const codegen::JitOptions &options,
              bool *cacheHit) {
  codegen::JitCache cache(options);
  auto artifact = cache.getArtifact(module, entry);
  if (cacheHit)
    *cacheHit = cache.stats().misses == 0;
  return artifact;
}

} // namespace smelt::tools
