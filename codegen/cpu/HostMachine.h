// The host CPU as an LLVM TargetMachine, shared by the JIT and the object-code emitter so that
// both generate the same instructions (same CPU, features and optimization level).
#pragma once

#include "llvm/Support/CodeGen.h"

#include <memory>
#include <optional>
#include <string>

namespace llvm {
class Module;
class TargetMachine;
} // namespace llvm

namespace smelt::codegen::cpu {

/// A TargetMachine for the host CPU with all its features, at -O3; `relocation` set for code
/// that goes into a shared library (PIC). Null with `error` set when the host is not supported.
std::unique_ptr<llvm::TargetMachine>
hostTargetMachine(std::string &error, std::optional<llvm::Reloc::Model> relocation = {});

/// Optimizes `module` at -O3 for `machine` (the pipeline of mlir::makeOptimizingTransformer)
/// and, when `printed` is given, prints the result there for dumps. Returns an error message,
/// empty on success.
std::string optimizeForHost(llvm::Module &module, llvm::TargetMachine &machine,
                            std::string *printed);

} // namespace smelt::codegen::cpu
