// libFuzzer target for the .mlir front door: parse and verify, then every function through
// the default pipeline and codegen::compile (CPU kernels, JIT-compiled). Any text gives an
// Executable or diagnostics, never a crash, an assertion, a sanitizer report or a hang. Seed it
// with the tests' .mlir files (scripts/fuzz.sh does); `-max_len` keeps inputs small enough
// that each run compiles in milliseconds.
#include "codegen/Compile.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace mlir;
  static MLIRContext *context = [] {
    auto *c = new MLIRContext(MLIRContext::Threading::DISABLED);
    smelt::codegen::loadDialects(*c);
    return c;
  }();
  // Diagnostics are the expected outcome for most inputs: swallowed, not printed.
  ScopedDiagnosticHandler quiet(context, [](Diagnostic &) { return success(); });
  std::string text(reinterpret_cast<const char *>(data), size);
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, context);
  if (!module)
    return 0;
  for (auto function : llvm::to_vector(module->getOps<func::FuncOp>()))
    if (!function.isDeclaration())
      (void)smelt::codegen::compile(*module, function.getName());
  return 0;
}
