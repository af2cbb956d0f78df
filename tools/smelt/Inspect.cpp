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
  // Only a dump pays for NVRTC: a plain CPU compile never renders CUDA.
  options.extend = [cudaArch, trace](mlir::func::FuncOp function, rt::Executable &,
                                     codegen::CompileDump *dump) -> mlir::LogicalResult {
    if (!dump)
      return mlir::success();
    std::string name = function.getSymName().str();
    rt::Trace::Scope span(trace, {"compiler", "phases"}, "CUDA codegen and NVRTC @" + name,
                          "compile");
    mlir::FailureOr<codegen::CudaFunctionCode> cuda =
        codegen::compileCudaFunction(function, cudaArch);
    if (failed(cuda))
      return mlir::failure();
    auto write = [&](const std::string &file, const std::string &text, const std::string &kind) {
      rt::Status s = dump->write(file, text.empty() ? "// @" + name + " has no fusions\n" : text,
                                 kind);
      if (!s.ok())
        function.emitError() << s.message();
      return s.ok();
    };
    if (!write("cuda-kernels.cu", cuda->code.source, "cuda kernels (source for NVRTC)") ||
        !write("cuda-kernels.ptx", cuda->code.ptx, "cuda kernels (ptx for " + cudaArch + ")"))
      return mlir::failure();
    return mlir::success();
  };
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
