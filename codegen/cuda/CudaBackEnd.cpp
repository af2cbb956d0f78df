// The CUDA target: renders the kernels placed on a GPU as one CUDA C++ module and compiles it
// with NVRTC for the options' arch; the Executable's CUDA code holds them, their kernels their
// launches. A dump gets the module's source and PTX, or, when nothing was placed on a GPU,
// those of every fusion of the function, so a CPU compile's dump shows the GPU's kernels too.
#include "codegen/BuildExecutable.h"
#include "codegen/Target.h"
#include "codegen/cuda/CudaCodegen.h"

namespace smelt::codegen {

namespace {

class CudaBackEnd final : public Target {
public:
  llvm::StringRef name() const override { return "cuda"; }

  bool compilesFor(llvm::StringRef device, const TargetOptions &options) const override {
    return device.starts_with("gpu") && !options.cudaArch.empty();
  }

  mlir::LogicalResult compile(mlir::func::FuncOp function, llvm::ArrayRef<mlir::Operation *> ops,
                              llvm::ArrayRef<size_t> kernels, const TargetOptions &options,
                              rt::Executable &exe, CompileDump *dump) override {
    if (options.cudaArch.empty() || (ops.empty() && !dump))
      return mlir::success();
    std::string name = function.getSymName().str();
    rt::Trace::Scope span(options.trace, {"compiler", "phases"},
                          "CUDA codegen and NVRTC @" + name, "compile");
    rt::CudaCode shown;
    if (!ops.empty()) {
      std::vector<rt::FusedKernel> launched;
      for (size_t k : kernels)
        launched.push_back(exe.kernels[k]);
      mlir::FailureOr<rt::CudaCode> code =
          compileCudaKernels(ops, launched, options.cudaArch, options.cudaFmad);
      if (failed(code))
        return mlir::failure();
      for (size_t i = 0; i < kernels.size(); ++i)
        exe.kernels[kernels[i]] = std::move(launched[i]);
      shown = *code;
      exe.cuda = std::make_shared<rt::CudaCode>(std::move(*code));
    } else {
      mlir::FailureOr<CudaFunctionCode> all = compileCudaFunction(function, options.cudaArch, options.cudaFmad);
      if (failed(all))
        return mlir::failure();
      shown = std::move(all->code);
    }
    if (!dump)
      return mlir::success();
    auto write = [&](const std::string &file, const std::string &text, const std::string &kind) {
      rt::Status s = dump->write(file, text.empty() ? "// @" + name + " has no fusions\n" : text,
                                 kind);
      if (!s.ok())
        function.emitError() << s.message();
      return s.ok();
    };
    if (!write("cuda-kernels.cu", shown.source, "cuda kernels (source for NVRTC)") ||
        !write("cuda-kernels.ptx", shown.ptx, "cuda kernels (ptx for " + options.cudaArch + ")"))
      return mlir::failure();
    return mlir::success();
  }
};

} // namespace

std::unique_ptr<Target> createCudaTarget() { return std::make_unique<CudaBackEnd>(); }

} // namespace smelt::codegen
