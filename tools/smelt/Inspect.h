// What the inspection flags do, shared by the subcommands that compile: --dump-dir (every
// compile's IR, fusion report, graph and kernels in a directory, CompileDump.h) and --profile
// (a Chrome trace of the compile and the runs, runtime/Trace.h). Each subcommand declares the
// flags itself (an LLVM option belongs to the subcommands named where it is defined) with the
// help text here, and builds its CompileOptions with compileOptions().
#pragma once

#include "codegen/Compile.h"
#include "runtime/Trace.h"

#include <string>

namespace smelt::tools {

extern const char kDumpDirHelp[];
extern const char kProfileHelp[];

/// CompileOptions writing dumps under `dumpDir` ("" for none) and spans into `trace` (null for
/// none). Where the CUDA back end is built, every dump also gets the function's fusions as CUDA
/// source and PTX for `cudaArch` (cuda-kernels.cu, cuda-kernels.ptx), whichever device runs it.
codegen::CompileOptions compileOptions(const std::string &dumpDir, rt::Trace *trace,
                                       const std::string &cudaArch = "sm_90");

/// Writes `trace` to `path` and says so on stderr; false after printing the error.
bool writeProfile(const rt::Trace &trace, const std::string &path);

} // namespace smelt::tools
