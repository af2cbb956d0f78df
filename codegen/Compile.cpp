// Compile entry points: parse, pick the entry function, run the pipeline, build the Executable
// and have each target compile the fused kernels placed on its devices.
#include "codegen/Compile.h"

#include "codegen/BuildExecutable.h"
#include "codegen/CompileDump.h"
#include "codegen/Target.h"
#include "ir/ConstantData.h"
#include "ir/SmeltDialect.h"
#include "passes/Passes.h"
#include "runtime/FileIO.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
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
  // A SourceMgr that outlives the parse lets a bytecode file's resources (a model's weights)
  // point into the mapped file instead of being copied into the context; each blob keeps it,
  // and so does an executable that shares them (shareSourceBytes).
  auto sourceMgr = std::make_shared<llvm::SourceMgr>();
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(path, sourceMgr, ParserConfig(&context));
  for (unsigned i = 1; module && i <= sourceMgr->getNumBuffers(); ++i) {
    const llvm::MemoryBuffer *buffer = sourceMgr->getMemoryBuffer(i);
    shareSourceBytes({buffer->getBufferStart(), buffer->getBufferSize()}, sourceMgr,
                     buffer->getBufferKind() == llvm::MemoryBuffer::MemoryBuffer_MMap);
  }
  return module;
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

/// The targets, one per device kind: the CPU always, CUDA where its back end is built.
static llvm::ArrayRef<std::unique_ptr<Target>> targets() {
  static const std::vector<std::unique_ptr<Target>> all = [] {
    std::vector<std::unique_ptr<Target>> list;
    list.push_back(createCpuTarget());
#ifdef SMELT_HAVE_CUDA_CODEGEN
    list.push_back(createCudaTarget());
#endif
    return list;
  }();
  return all;
}

/// Gives each target the kernels placed on its devices; every fusion must find one. (An
/// argmax or scatter_add with a GPU kernel of its own that no target compiles runs with the
/// CPU's routine where a GPU is not used, and the GPU executor says it has no CUDA code.)
static LogicalResult compileKernels(func::FuncOp function, const TargetOptions &options,
                                    rt::Executable &exe, CompileDump *dump) {
  std::vector<Operation *> ops = kernelOpsInOrder(function);
  std::vector<char> compiled(ops.size(), 0);
  for (const std::unique_ptr<Target> &target : targets()) {
    std::vector<Operation *> mine;
    std::vector<size_t> kernels;
    for (auto [i, op] : llvm::enumerate(ops)) {
      auto device = op->getAttrOfType<StringAttr>("smelt.device");
      if (target->compilesFor(device ? device.getValue() : "cpu:0", options)) {
        mine.push_back(op);
        kernels.push_back(i);
        compiled[i] = 1;
      }
    }
    if (failed(target->compile(function, mine, kernels, options, exe, dump)))
      return failure();
  }
  for (auto [i, op] : llvm::enumerate(ops))
    if (!compiled[i] && isa<FusionOp>(op))
      return op->emitOpError("is placed on ")
             << op->getAttr("smelt.device") << " but no target compiles for it: this smelt "
             << "was built without the CUDA back end";
  return success();
}

FailureOr<rt::Executable> buildWithKernels(func::FuncOp function) {
  FailureOr<rt::Executable> exe = buildExecutable(function);
  if (failed(exe) || failed(compileKernels(function, TargetOptions{}, *exe, nullptr)))
    return failure();
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
    if (options.dumpWrittenTo)
      *options.dumpWrittenTo = dump->directory();
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
  FailureOr<rt::Executable> exe = buildExecutable(function);
  if (failed(exe))
    return failure();
  {
    std::string what =
        options.cpuObject ? "codegen and LLVM object code @" : "codegen and LLVM JIT @";
    rt::Trace::Scope span(options.trace, {"compiler", "phases"}, what + name, "compile");
    TargetOptions targetOptions{options.cudaArch, options.cudaFmad,  options.hostFallback,
                                options.cpuObject, options.trace, /*keepLlvmIR=*/dump != nullptr};
    if (failed(compileKernels(function, targetOptions, *exe, dump.get())))
      return failure();
  }
  if (dump) {
    dump->setPeakBytes(exe->peakBytes);
    (void)dump->writeGraph(function);
    (void)dump->write("executable.txt", exe->str(), "executable plan");
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
