// The model file a subcommand compiles (.mlir, .mlirbc or .onnx): a context of its own, the module
// parsed with every diagnostic printed as "file:line:col: error: ..." while it lives, and its entry
// function.
#pragma once

#include "tools/smelt/ModelSource.h"

#include "codegen/Compile.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/SourceMgr.h"

#include <string>

namespace smelt::tools {

class ModuleFile {
public:
  /// The module of a .mlir, .mlirbc or .onnx file, as `source` reads it.
  ModuleFile(const std::string &path, const ModelSourceFlags &source)
      : module(source.read(context, path)) {}

  /// Function `name` (empty: @main, or the only function); null after printing why, or when
  /// the file did not parse.
  mlir::func::FuncOp entry(const std::string &name) {
    return module ? codegen::findEntry(*module, name) : nullptr;
  }

  // In this order: the handler needs the context, parsing needs the handler.
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics{sourceMgr, &context};
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

} // namespace smelt::tools
