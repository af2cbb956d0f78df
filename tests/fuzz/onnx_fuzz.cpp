// libFuzzer target for the ONNX importer (`smelt import`, `smelt run model.onnx`): any bytes give
// a verified module or an ImportError naming the file, never a crash, a sanitizer report, an
// allocation beyond what the file holds or a hang. (An Internal error is not a finding here:
// the dialect refusing what the importer built is also how a mutated model whose declared
// shapes do not fit its ops, [3] and [11] into Min, is refused.) Seeds: the ONNX test data's
// node models (scripts/fuzz.sh). Also built without libFuzzer, with ReplayMain.cpp, as the
// onnx-fuzz-replay test that ctest runs on those models.
#include "FuzzFile.h"

#include "frontend/onnx/OnnxImport.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace smelt;
  static auto *context = new mlir::MLIRContext(mlir::MLIRContext::Threading::DISABLED);
  // A refused op reports a diagnostic before the importer turns it into an error: not printed.
  mlir::ScopedDiagnosticHandler quiet(context, [](mlir::Diagnostic &) { return mlir::success(); });
  std::string path = fuzz::writeInput(data, size, ".onnx");

  auto checkError = [&](llvm::Error error) {
    llvm::handleAllErrors(std::move(error), [&](const onnx::ImportError &e) {
      fuzz::expectNamesFile("onnx_fuzz", e.message, path);
    });
  };
  llvm::Expected<std::vector<onnx::ModelInput>> inputs = onnx::modelInputs(path);
  if (!inputs) {
    checkError(inputs.takeError());
    return 0;
  }
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
      onnx::importModel(path, onnx::ImportOptions{}, *context);
  if (!module) {
    checkError(module.takeError());
    return 0;
  }
  if (mlir::failed(mlir::verify(**module)))
    fuzz::failWith("onnx_fuzz", "an imported module that does not verify", path);
  return 0;
}
