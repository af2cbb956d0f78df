// compileCpuKernels / compileCpuSharedLibrary: emit every kernel into one module of a context of
// its own (the caller's context never sees arith, scf or the LLVM dialect), lower it, then JIT it
// once or emit and link it as a shared library. Failures past emission are compiler bugs, but
// still diagnostics: they are reported at the fusion whose kernel the message names (its ops
// carry the kernel's name as their location).
#include "codegen/cpu/CpuKernels.h"

#include "codegen/cpu/Jit.h"
#include "codegen/cpu/KernelEmitter.h"
#include "codegen/cpu/Lower.h"
#include "codegen/cpu/ObjectCode.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

using namespace mlir;

namespace smelt::codegen {

namespace {

/// The fusion a message is about: the one whose kernel name it mentions, else the first.
FusionOp blame(ArrayRef<FusionOp> fusions, ArrayRef<std::string> names, StringRef message) {
  for (auto [fusion, name] : llvm::zip(fusions, names))
    if (message.contains(name))
      return fusion;
  return FusionOp(fusions.front());
}

/// Emits each fusion as kernel names[i] into a module of a context of its own, lowers it to the
/// LLVM dialect and hands it to `finish` (JIT or object code), which returns null or nullopt
/// with its messages on failure. Every failure becomes a diagnostic at the fusion it concerns.
template <typename Result>
FailureOr<Result> buildKernels(ArrayRef<FusionOp> fusions, ArrayRef<std::string> names,
                               llvm::function_ref<Result(ModuleOp, std::string &)> finish) {
  if (names.size() != fusions.size())
    return FusionOp(fusions.front()).emitOpError("CPU codegen got ")
           << names.size() << " kernel names for " << fusions.size() << " fusions";

  MLIRContext context(MLIRContext::Threading::DISABLED);
  context.loadDialect<arith::ArithDialect, func::FuncDialect, LLVM::LLVMDialect, math::MathDialect,
                      scf::SCFDialect>();
  std::string messages;
  ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diagnostic) {
    llvm::raw_string_ostream os(messages);
    os << diagnostic.getLocation() << ": " << diagnostic << "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  for (auto [fusion, name] : llvm::zip(fusions, names))
    if (failed(cpu::emitKernel(*module, fusion, name)))
      return failure();

  auto fail = [&](StringRef what) {
    return blame(fusions, names, messages).emitOpError("CPU kernel ") << what << ": " << messages;
  };
  if (failed(verify(*module)))
    return fail("is invalid MLIR (a CPU codegen bug)");
  if (failed(cpu::lowerToLLVMDialect(*module)))
    return fail("failed to lower to the LLVM dialect");
  Result result = finish(*module, messages);
  if (!result)
    return fail("failed to compile");
  return result;
}

} // namespace

FailureOr<std::shared_ptr<const rt::CpuCode>> compileCpuKernels(ArrayRef<FusionOp> fusions,
                                                                ArrayRef<std::string> names) {
  if (fusions.empty())
    return std::shared_ptr<const rt::CpuCode>(std::make_shared<rt::CpuCode>());
  FailureOr<std::shared_ptr<rt::CpuCode>> code = buildKernels<std::shared_ptr<rt::CpuCode>>(
      fusions, names,
      [&](ModuleOp module, std::string &error) { return cpu::jitCompile(module, names, error); });
  if (failed(code))
    return failure();
  return std::shared_ptr<const rt::CpuCode>(std::move(*code));
}

FailureOr<std::vector<uint8_t>> compileCpuSharedLibrary(ArrayRef<FusionOp> fusions,
                                                        ArrayRef<std::string> names,
                                                        std::string *llvmIR) {
  if (fusions.empty())
    return std::vector<uint8_t>();
  using Library = std::optional<std::vector<uint8_t>>;
  auto build = [&](ModuleOp module, std::string &error) -> Library {
    std::optional<std::vector<char>> object = cpu::emitObjectFile(module, error, llvmIR);
    return object ? cpu::linkSharedLibrary(*object, error) : std::nullopt;
  };
  FailureOr<Library> library = buildKernels<Library>(fusions, names, build);
  if (failed(library))
    return failure();
  return std::move(**library);
}

} // namespace smelt::codegen
