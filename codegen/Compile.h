// Compile entry points shared by the tools, tests and examples: load a module, run the default
// pipeline, build the Executable of one function.
#pragma once

#include "runtime/Executable.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

namespace smelt::codegen {

/// Loads the dialects a smelt module uses (smelt, func) into `context`.
void loadDialects(mlir::MLIRContext &context);

/// Parses and verifies the .mlir file at `path`; diagnostics go to the context's handler (the
/// tools print them as "file:line:col: error: ..."). Null on failure.
mlir::OwningOpRef<mlir::ModuleOp> parseModuleFile(mlir::MLIRContext &context,
                                                  llvm::StringRef path);

/// Runs the default pipeline on `module` and builds the Executable of function `entry`. Empty
/// `entry` picks "main", or the only function when there is one. Errors are diagnostics.
mlir::FailureOr<rt::Executable> compile(mlir::ModuleOp module, llvm::StringRef entry = "");

/// The function `compile` would pick, or null with a diagnostic naming the choices.
mlir::func::FuncOp findEntry(mlir::ModuleOp module, llvm::StringRef entry);

} // namespace smelt::codegen
