// compileCpuKernels / compileCpuSharedLibrary: the CPU kernels, compiled in parts at once.
// Equivalent fusions (codegen/EquivalentFusions.h) share one kernel, whose symbol gets the
// others' names as aliases. The distinct kernels are split into as many parts as the process
// has CPU threads (rt::cpuThreads); each part is emitted into a module of a context of its own
// (the caller's context never sees arith, scf or the LLVM dialect), lowered, optimized and made
// an object file on a thread of its own, because LLVM's optimization and code generation are
// most of a compile and one module runs them on one core. The objects are then JIT-linked in
// process or linked into a shared library. Failures past emission are compiler bugs, but still
// diagnostics: once the threads are done, they are reported at the fusion whose kernel the
// message names (its ops carry the kernel's name as their location).
#include "codegen/cpu/CpuKernels.h"

#include "codegen/EquivalentFusions.h"
#include "codegen/cpu/Jit.h"
#include "codegen/cpu/KernelEmitter.h"
#include "codegen/cpu/Lower.h"
#include "codegen/cpu/ObjectCode.h"
#include "runtime/CpuThreads.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <algorithm>
#include <thread>

using namespace mlir;

namespace smelt::codegen {

namespace {

/// The kernels one thread compiles into one object file: the fusions it emits, in step
/// order, and the other names of their kernels.
struct Part {
  std::vector<size_t> fusions;
  std::vector<cpu::KernelAlias> aliases;
  size_t cost = 0;
};

/// What a part became: its object file, or the error to report at fusion `blamed`.
struct CompiledPart {
  std::vector<char> object;
  std::string llvmIR;
  std::string error;
  size_t blamed = 0;
};

/// How much LLVM's work on a fusion's kernel weighs, for balancing the parts: it grows with
/// the body, and every kernel has its loops.
size_t compileCost(FusionOp fusion) {
  return 8 + fusion.getBody().front().getOperations().size();
}

/// Splits the distinct kernels (first[i] == i) into at most `count` parts of about equal
/// cost, the costliest first, each to the part with the least so far; a duplicate's name
/// becomes an alias in its kernel's part.
std::vector<Part> partition(ArrayRef<FusionOp> fusions, ArrayRef<std::string> names,
                            ArrayRef<size_t> first, size_t count) {
  std::vector<size_t> distinct;
  for (size_t i = 0; i < fusions.size(); ++i)
    if (first[i] == i)
      distinct.push_back(i);
  std::vector<size_t> costs(fusions.size());
  for (size_t i : distinct)
    costs[i] = compileCost(fusions[i]);
  std::stable_sort(distinct.begin(), distinct.end(),
                   [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<Part> parts(std::min(count, distinct.size()));
  std::vector<size_t> partOf(fusions.size());
  for (size_t i : distinct) {
    auto lightest = std::min_element(parts.begin(), parts.end(), [](const Part &a, const Part &b) {
      return a.cost < b.cost;
    });
    lightest->fusions.push_back(i);
    lightest->cost += costs[i];
    partOf[i] = lightest - parts.begin();
  }
  for (size_t i = 0; i < fusions.size(); ++i)
    if (first[i] != i)
      parts[partOf[first[i]]].aliases.push_back({names[i], names[first[i]]});
  for (Part &part : parts)
    llvm::sort(part.fusions);
  return parts;
}

/// Emits, lowers and compiles one part into an object file, on the calling thread.
CompiledPart compilePart(ArrayRef<FusionOp> fusions, ArrayRef<std::string> names,
                         const Part &part, bool keepIR, rt::Trace *trace,
                         const rt::Trace::Track &track) {
  CompiledPart result;
  result.blamed = part.fusions.front();
  MLIRContext context(MLIRContext::Threading::DISABLED);
  context.loadDialect<arith::ArithDialect, func::FuncDialect, LLVM::LLVMDialect, math::MathDialect,
                      scf::SCFDialect>();
  std::string messages;
  ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diagnostic) {
    llvm::raw_string_ostream os(messages);
    os << diagnostic.getLocation() << ": " << diagnostic << "\n";
    return success();
  });
  // The fusion a message is about: the one whose kernel name it mentions.
  auto fail = [&](StringRef what) {
    for (size_t i : part.fusions)
      if (StringRef(messages).contains(names[i])) {
        result.blamed = i;
        break;
      }
    result.error = ("CPU kernel " + what + ": " + messages).str();
    return std::move(result);
  };
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  {
    rt::Trace::Scope span(trace, track,
                          "emit and lower " + std::to_string(part.fusions.size()) + " kernels",
                          "compile");
    for (size_t i : part.fusions)
      if (std::string error = cpu::emitKernel(*module, fusions[i], names[i]); !error.empty()) {
        result.blamed = i;
        result.error = std::move(error);
        return result;
      }
    if (failed(verify(*module)))
      return fail("is invalid MLIR (a CPU codegen bug)");
    if (failed(cpu::lowerToLLVMDialect(*module)))
      return fail("failed to lower to the LLVM dialect");
  }
  std::optional<std::vector<char>> object = cpu::emitObjectFile(
      *module, part.aliases, messages, keepIR ? &result.llvmIR : nullptr, trace, track);
  if (!object)
    return fail("failed to compile");
  result.object = std::move(*object);
  return result;
}

/// Every fusion's kernel as object files, one per part, compiled on threads of their own;
/// `llvmIR`, when given, receives the parts' optimized IR. Fails with a diagnostic.
FailureOr<std::vector<std::vector<char>>> compileObjects(ArrayRef<FusionOp> fusions,
                                                         ArrayRef<std::string> names,
                                                         std::string *llvmIR, rt::Trace *trace) {
  if (names.size() != fusions.size())
    return FusionOp(fusions.front()).emitOpError("CPU codegen got ")
           << names.size() << " kernel names for " << fusions.size() << " fusions";
  // Threads read the fusions at once, which needs a context that locks its uniquing.
  size_t threads = fusions.front()->getContext()->isMultithreadingEnabled()
                       ? size_t(std::max(1, rt::cpuThreadsOrDefault()))
                       : 1;
  std::vector<Part> parts = partition(fusions, names, firstEquivalentFusions(fusions), threads);

  std::vector<CompiledPart> compiled(parts.size());
  auto run = [&](size_t p) {
    rt::Trace::Track track{"compiler", "cpu codegen " + std::to_string(p)};
    compiled[p] = compilePart(fusions, names, parts[p], llvmIR != nullptr, trace, track);
  };
  std::vector<std::thread> workers;
  for (size_t p = 1; p < parts.size(); ++p)
    workers.emplace_back(run, p);
  run(0);
  for (std::thread &worker : workers)
    worker.join();

  // The first failure in step order, whichever thread met it first.
  const CompiledPart *failedPart = nullptr;
  for (const CompiledPart &part : compiled)
    if (!part.error.empty() && (!failedPart || part.blamed < failedPart->blamed))
      failedPart = &part;
  if (failedPart)
    return FusionOp(fusions[failedPart->blamed]).emitOpError() << failedPart->error;
  std::vector<std::vector<char>> objects;
  for (CompiledPart &part : compiled) {
    objects.push_back(std::move(part.object));
    if (llvmIR)
      *llvmIR += part.llvmIR;
  }
  return objects;
}

} // namespace

FailureOr<std::shared_ptr<const rt::CpuCode>>
compileCpuKernels(ArrayRef<FusionOp> fusions, ArrayRef<std::string> names, bool keepLlvmIR,
                  rt::Trace *trace) {
  if (fusions.empty())
    return std::shared_ptr<const rt::CpuCode>(std::make_shared<rt::CpuCode>());
  std::string llvmIR;
  FailureOr<std::vector<std::vector<char>>> objects =
      compileObjects(fusions, names, keepLlvmIR ? &llvmIR : nullptr, trace);
  if (failed(objects))
    return failure();
  rt::Trace::Scope span(trace, {"compiler", "cpu codegen 0"}, "JIT link", "compile");
  std::string error;
  std::shared_ptr<rt::CpuCode> linked = cpu::jitLink(*objects, names, error);
  if (!linked)
    return FusionOp(fusions.front()).emitOpError("CPU kernels failed to load: ") << error;
  linked->llvmIR = std::move(llvmIR);
  return std::shared_ptr<const rt::CpuCode>(std::move(linked));
}

FailureOr<std::vector<uint8_t>> compileCpuSharedLibrary(ArrayRef<FusionOp> fusions,
                                                        ArrayRef<std::string> names,
                                                        std::string *llvmIR, rt::Trace *trace) {
  if (fusions.empty())
    return std::vector<uint8_t>();
  FailureOr<std::vector<std::vector<char>>> objects =
      compileObjects(fusions, names, llvmIR, trace);
  if (failed(objects))
    return failure();
  rt::Trace::Scope span(trace, {"compiler", "cpu codegen 0"}, "link a shared library",
                        "compile");
  std::string error;
  std::optional<std::vector<uint8_t>> library = cpu::linkSharedLibrary(*objects, error);
  if (!library)
    return FusionOp(fusions.front()).emitOpError("CPU kernels failed to link: ") << error;
  return std::move(*library);
}

} // namespace smelt::codegen
