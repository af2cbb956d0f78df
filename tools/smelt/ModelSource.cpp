// ModelSourceFlags: .mlir, .mlirbc or .onnx as the model of `smelt run`, `bench`, `compile` and
// `dump`.
#include "tools/smelt/ModelSource.h"
#include "tools/smelt/Commands.h"

#include "codegen/Compile.h"
#include "frontend/onnx/OnnxImport.h"

#include "llvm/Support/Path.h"

namespace cl = llvm::cl;

namespace smelt::tools {

ModelSourceFlags::ModelSourceFlags(cl::SubCommand &command)
    : inputShapes("input-shape",
                  cl::desc("For an .onnx model: an input's shape where the model leaves a "
                           "dimension symbolic (NAME=DxDx..., as smelt import takes it)"),
                  cl::value_desc("name=1x3x224x224"), cl::sub(command), cl::cat(smeltCategory())) {}

bool isOnnxFile(const std::string &path) {
  return llvm::sys::path::extension(path).equals_insensitive(".onnx");
}

mlir::OwningOpRef<mlir::ModuleOp> ModelSourceFlags::read(mlir::MLIRContext &context,
                                                         const std::string &path) const {
  if (!isOnnxFile(path)) {
    if (!inputShapes.empty()) {
      fail("--input-shape is for .onnx models; " + path + " is a module with its shapes");
      return nullptr;
    }
    return codegen::parseModuleFile(context, path);
  }
  onnx::ImportOptions options;
  options.initializersAsConstants = true;
  for (const std::string &spec : inputShapes)
    if (llvm::Error e = onnx::parseInputShape(spec, options)) {
      fail(llvm::toString(std::move(e)));
      return nullptr;
    }
  codegen::loadDialects(context);
  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
      onnx::importModel(path, options, context);
  if (!module) {
    fail(llvm::toString(module.takeError()));
    return nullptr;
  }
  return std::move(*module);
}

} // namespace smelt::tools
