// The CPU target: compiles the fusions placed on cpu:0 (and, without a CUDA arch or for a host
// fallback, the GPU's too) into LLVM kernels, JIT-compiled in process or linked into a shared
// library for an AOT artifact. The Executable's CPU entries are indexed like its kernels; a
// kernel the CPU did not compile has a null entry, as has the GPU kernel of an argmax or
// scatter_add, whose step the CPU runs with its own routine (runtime/cpu).
#include "codegen/Target.h"
#include "codegen/cpu/CpuKernels.h"
#include "runtime/CpuObject.h"

namespace smelt::codegen {

namespace {

class CpuBackEnd final : public Target {
public:
  llvm::StringRef name() const override { return "cpu"; }

  bool compilesFor(llvm::StringRef device, const TargetOptions &options) const override {
    return !device.starts_with("gpu") || options.cudaArch.empty() || options.hostFallback;
  }

  mlir::LogicalResult compile(mlir::func::FuncOp function, llvm::ArrayRef<mlir::Operation *> ops,
                              llvm::ArrayRef<size_t> allKernels, const TargetOptions &options,
                              rt::Executable &exe, CompileDump *dump) override {
    std::vector<FusionOp> fusions;
    std::vector<size_t> kernels;
    for (auto [op, k] : llvm::zip(ops, allKernels))
      if (auto fusion = mlir::dyn_cast<FusionOp>(op)) {
        fusions.push_back(fusion);
        kernels.push_back(k);
      }
    if (fusions.empty())
      return mlir::success();
    std::vector<std::string> names;
    for (size_t k : kernels)
      names.push_back(exe.kernels[k].name);
    std::shared_ptr<const rt::CpuCode> compiled;
    std::string llvmIR;
    if (options.cpuObject) {
      mlir::FailureOr<std::vector<uint8_t>> bytes =
          compileCpuSharedLibrary(fusions, names, options.keepLlvmIR ? &llvmIR : nullptr,
                                  options.trace);
      if (failed(bytes))
        return mlir::failure();
      // What is written to an artifact is what the Executable runs.
      rt::Expected<std::shared_ptr<const rt::CpuCode>> code = rt::loadCpuObject(*bytes, names);
      if (!code)
        return function.emitError() << "the CPU kernels' shared library does not load: "
                                    << code.message();
      compiled = std::move(*code);
      *options.cpuObject = std::move(*bytes);
    } else {
      mlir::FailureOr<std::shared_ptr<const rt::CpuCode>> code =
          compileCpuKernels(fusions, names, options.keepLlvmIR, options.trace);
      if (failed(code))
        return mlir::failure();
      compiled = std::move(*code);
      llvmIR = compiled->llvmIR;
    }
    auto code = std::make_shared<rt::CpuCode>();
    code->owner = compiled->owner;
    code->entries.assign(exe.kernels.size(), nullptr);
    for (size_t i = 0; i < kernels.size(); ++i)
      code->entries[kernels[i]] = compiled->entries[i];
    code->llvmIR = std::move(llvmIR);
    exe.cpu = std::move(code);
    if (dump && !exe.cpu->llvmIR.empty())
      if (rt::Status s = dump->write("cpu-kernels.ll", exe.cpu->llvmIR,
                                     "cpu kernels (optimized LLVM IR)");
          !s.ok())
        return function.emitError() << s.message();
    return mlir::success();
  }
};

} // namespace

std::unique_ptr<Target> createCpuTarget() { return std::make_unique<CpuBackEnd>(); }

} // namespace smelt::codegen
