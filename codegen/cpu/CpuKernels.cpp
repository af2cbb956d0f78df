// compileCpuKernels: emit every kernel into one module of a context of its own (the caller's
// context never sees arith, scf or the LLVM dialect), lower it, JIT it once. Failures past
// emission are compiler bugs, but still diagnostics: they are reported at the fusion whose
// kernel the message names (its ops carry the kernel's name as their location).
#include "codegen/cpu/CpuKernels.h"

#include "codegen/cpu/Jit.h"
#include "codegen/cpu/KernelEmitter.h"
#include "codegen/cpu/Lower.h"

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

} // namespace

FailureOr<std::shared_ptr<const rt::CpuCode>> compileCpuKernels(ArrayRef<FusionOp> fusions,
                                                                ArrayRef<std::string> names) {
  if (fusions.empty())
    return std::shared_ptr<const rt::CpuCode>(std::make_shared<rt::CpuCode>());
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
  std::shared_ptr<rt::CpuCode> code = cpu::jitCompile(*module, names, messages);
  if (!code)
    return fail("failed to compile");
  return std::shared_ptr<const rt::CpuCode>(std::move(code));
}

} // namespace smelt::codegen
