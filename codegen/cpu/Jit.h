// JIT compilation of the kernel module (codegen/cpu/Jit.cpp): the one translation unit that
// includes LLVM's JIT, kept apart because it is slow to compile.
#pragma once

#include "runtime/Executable.h"

#include "mlir/IR/BuiltinOps.h"

#include <memory>
#include <string>

namespace smelt::codegen::cpu {

/// Translates `module` (LLVM dialect) to LLVM IR, optimizes it at -O3 for the host CPU (its
/// features included, so the loop vectorizer uses the widest vectors the CPU has), JIT-compiles
/// it and looks up `names`. On failure, `error` says what failed; a missing symbol is named.
std::shared_ptr<rt::CpuCode> jitCompile(mlir::ModuleOp module, llvm::ArrayRef<std::string> names,
                                        std::string &error);

} // namespace smelt::codegen::cpu
