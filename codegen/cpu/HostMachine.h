// The host CPU as an LLVM TargetMachine, shared by the JIT and the object-code emitter so that
// both generate the same instructions (same CPU, features and optimization level).
#pragma once

#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/Support/CodeGen.h"

#include <memory>
#include <optional>
#include <string>

namespace llvm {
class Module;
class TargetMachine;
} // namespace llvm

namespace smelt::codegen::cpu {

/// The host CPU with all its features, code generation at -O3, position-independent code.
/// Nothing with `error` set when the host is not supported.
std::optional<llvm::orc::JITTargetMachineBuilder> hostMachineBuilder(std::string &error);
/// A TargetMachine made by hostMachineBuilder(). Null with `error` set when the host is not
/// supported.
std::unique_ptr<llvm::TargetMachine> hostTargetMachine(std::string &error);

/// Optimizes `module` at -O3 for `machine` (the pipeline of mlir::makeOptimizingTransformer)
/// and, when `printed` is given, prints the result there for dumps. Returns an error message,
/// empty on success.
std::string optimizeForHost(llvm::Module &module, llvm::TargetMachine &machine,
                            std::string *printed);

} // namespace smelt::codegen::cpu
