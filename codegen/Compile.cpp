// Compile entry points: parse, pick the entry function, run the pipeline, build the Executable
// and compile its fused kernels.
#include "codegen/Compile.h"

#include "codegen/BuildExecutable.h"
#include "codegen/CompileDump.h"
#include "codegen/cpu/CpuKernels.h"
#include "ir/SmeltDialect.h"
#include "passes/Passes.h"
#include "runtime/CpuObject.h"
#include "runtime/FileIO.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;

namespace smelt::codegen {

void loadDialects(MLIRContext &context) {
  context.loadDialect<SmeltDialect, func::FuncDialect>();
}

OwningOpRef<ModuleOp> parseModuleFile(MLIRContext &context, llvm::StringRef path) {
  loadDialects(context);
  // A directory, a FIFO or a device such as /dev/zero would be read until memory runs out or
  // forever: refuse what is not a regular file ("-" is standard input, as for mlir-opt).
  if (path != "-")
    if (rt::Status s = rt::checkRegularFile(path.str()); !s.ok()) {
      emitError(UnknownLoc::get(&context)) << s.message();
      return nullptr;
    }
  return parseSourceFile<ModuleOp>(path, &context);
}

func::FuncOp findEntry(ModuleOp module, llvm::StringRef entry) {
  auto functions = llvm::to_vector(module.getOps<func::FuncOp>());
  if (!entry.empty()) {
    if (auto f = module.lookupSymbol<func::FuncOp>(entry))
      return f;
  } else if (functions.size() == 1) {
    return functions.front();
  } else if (auto f = module.lookupSymbol<func::FuncOp>("main")) {
    return f;
  }
  std::string names;
  for (func::FuncOp f : functions)
    names += (names.empty() ? "@" : ", @") + f.getSymName().str();
  module.emitError() << "no function "
                     << (entry.empty() ? "@main (and not exactly one function)"
                                       : "@" + entry.str())
                     << " to compile; the module has " << (names.empty() ? "none" : names);
  return nullptr;
}

/// The kernels' symbols; buildExecutable numbers kernels in the order of the fusion ops.
static std::vector<std::string> kernelNames(const rt::Executable &exe) {
  std::vector<std::string> names;
  for (const rt::FusedKernel &kernel : exe.kernels)
    names.push_back(kernel.name);
  return names;
}

/// buildWithKernels' counterpart for AOT: the kernels as a shared library (kept in `library`)
/// that the Executable runs, so what is written to an artifact is what was just compiled.
static FailureOr<rt::Executable> buildWithObjectCode(func::FuncOp function,
                                                     std::vector<uint8_t> &library) {
  FailureOr<rt::Executable> exe = buildExecutable(function);
  if (failed(exe) || exe->kernels.empty())
    return exe;
  std::vector<std::string> names = kernelNames(*exe);
  std::string llvmIR;
  FailureOr<std::vector<uint8_t>> bytes =
      compileCpuSharedLibrary(fusionsInOrder(function), names, &llvmIR);
  if (failed(bytes))
    return failure();
  rt::Expected<std::shared_ptr<const rt::CpuCode>> code = rt::loadCpuObject(*bytes, names);
  if (!code)
    return function.emitError() << "the CPU kernels' shared library does not load: "
                                << code.message();
  auto withIR = std::make_shared<rt::CpuCode>(**code);
  withIR->llvmIR = std::move(llvmIR);
  exe->cpu = std::move(withIR);
  library = std::move(*bytes);
  return exe;
}

FailureOr<rt::Executable> buildWithKernels(func::FuncOp function) {
  FailureOr<rt::Executable> exe = buildExecutable(function);
  if (failed(exe) || exe->kernels.empty())
    return exe;
  std::vector<std::string> names = kernelNames(*exe);
  FailureOr<std::shared_ptr<const rt::CpuCode>> cpu =
      compileCpuKernels(fusionsInOrder(function), names);
  if (failed(cpu))
    return failure();
  exe->cpu = std::move(*cpu);
  return exe;
}

FailureOr<rt::Executable> compile(ModuleOp module, llvm::StringRef entry,
                                  const CompileOptions &options) {
  if (failed(verify(module)))
    return failure();
  // The pipeline rewrites what it runs on; the caller's module is left as it was.
  OwningOpRef<ModuleOp> copy = module.clone();
  func::FuncOp function = findEntry(*copy, entry);
  if (!function)
    return failure();
  // Only the entry goes through the pipeline: the module's other functions (an init function,
  // an evaluation step) are compiled when they are asked for, not once per compile.
  for (auto other : llvm::make_early_inc_range(copy->getOps<func::FuncOp>()))
    if (other != function)
      other.erase();
  std::string name = function.getSymName().str();
  std::unique_ptr<CompileDump> dump;
  if (!options.dumpDir.empty()) {
    rt::Expected<std::unique_ptr<CompileDump>> created =
        CompileDump::create(options.dumpDir, name);
    if (!created)
      return module.emitError() << created.message();
    dump = std::move(*created);
  }
  PipelineOptions pipeline = options.pipeline;
  bool reportInDump = dump && pipeline.fuse && pipeline.fusionReport.empty();
  if (reportInDump)
    pipeline.fusionReport = dump->path("fusion-report.txt");
  PassManager pm(module->getContext());
  buildDefaultPipeline(pm, pipeline);
  instrumentPasses(pm, *copy, dump.get(), options.trace);
  {
    rt::Trace::Scope span(options.trace, {"compiler", "phases"}, "pipeline @" + name, "compile");
    if (failed(pm.run(*copy)))
      return failure();
  }
  if (reportInDump)
    dump->record("fusion-report.txt", "fusion decisions");
  FailureOr<rt::Executable> exe;
  {
    std::string what =
        options.cpuObject ? "codegen and LLVM object code @" : "codegen and LLVM JIT @";
    rt::Trace::Scope span(options.trace, {"compiler", "phases"}, what + name, "compile");
    exe = options.cpuObject ? buildWithObjectCode(function, *options.cpuObject)
                            : buildWithKernels(function);
  }
  if (failed(exe))
    return failure();
  if (options.extend && failed(options.extend(function, *exe, dump.get())))
    return failure();
  if (dump) {
    dump->setPeakBytes(exe->peakBytes);
    (void)dump->writeGraph(function);
    (void)dump->write("executable.txt", exe->str(), "executable plan");
    if (exe->cpu && !exe->cpu->llvmIR.empty())
      (void)dump->write("cpu-kernels.ll", exe->cpu->llvmIR, "cpu kernels (optimized LLVM IR)");
    if (rt::Status s = dump->finish(); !s.ok())
      return module.emitError() << s.message();
  }
  return exe;
}

FailureOr<rt::Executable> compile(ModuleOp module, llvm::StringRef entry,
                                  const PipelineOptions &options) {
  CompileOptions compileOptions;
  compileOptions.pipeline = options;
  return compile(module, entry, compileOptions);
}

} // namespace smelt::codegen
