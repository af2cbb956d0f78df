// The inspection flags' shared half: CompileOptions with the CUDA dump hook, and the profile
// writer.
#include "tools/smelt/Inspect.h"

#include "codegen/CompileDump.h"
#ifdef SMELT_HAVE_CUDA_CODEGEN
#include "codegen/cuda/CudaCodegen.h"
#endif

#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

namespace smelt::tools {

const char kDumpDirHelp[] = "Write what each compile did (IR after every pass, fusion report, "
                            "graph, kernels) to DIR/<function>-<N>";
const char kProfileHelp[] = "Write a Chrome trace of the compile and every step run to FILE "
                            "(open it in https://ui.perfetto.dev)";

codegen::CompileOptions compileOptions(const std::string &dumpDir, rt::Trace *trace,
                                       const std::string &cudaArch) {
  codegen::CompileOptions options;
  options.dumpDir = dumpDir;
  options.trace = trace;
#ifdef SMELT_HAVE_CUDA_CODEGEN
  // With an arch, a dump also holds every fusion as CUDA; fusions compile for CUDA only where
  // placement put them on a GPU, so a plain CPU compile never runs NVRTC.
  options.cudaArch = cudaArch;
#else
  (void)cudaArch;
#endif
  return options;
}

bool writeProfile(const rt::Trace &trace, const std::string &path) {
  if (rt::Status s = trace.write(path); !s.ok()) {
    llvm::WithColor::error(llvm::errs(), "smelt") << s.message() << "\n";
    return false;
  }
  llvm::errs() << "wrote " << path << " (" << trace.eventCount()
               << " events; open it in https://ui.perfetto.dev)\n";
  return true;
}

} // namespace smelt::tools
