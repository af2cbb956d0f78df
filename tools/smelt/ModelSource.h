// What `smelt run`, `bench`, `compile` and `dump` read: a .mlir/.mlirbc module, or an ONNX model
// (.onnx) imported in the process with its weights as constants, as `smelt import
// --initializers-as-constants` would write it, so that a model is run or timed as exported
// without an import step. `--input-shape` fixes an ONNX input's symbolic dimensions.
#pragma once

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/CommandLine.h"

#include <string>

namespace smelt::tools {

/// Made in each command's own file, as CacheFlags are.
struct ModelSourceFlags {
  explicit ModelSourceFlags(llvm::cl::SubCommand &command);
  llvm::cl::list<std::string> inputShapes;

  /// The module of `path`: parsed, or imported when it names an .onnx file. Errors are printed
  /// (MLIR diagnostics through the context's handler, or the importer's error); null then.
  mlir::OwningOpRef<mlir::ModuleOp> read(mlir::MLIRContext &context,
                                         const std::string &path) const;
};

/// True when `path` names an ONNX model (by its extension).
bool isOnnxFile(const std::string &path);

} // namespace smelt::tools
