// Ahead-of-time CPU code (codegen/cpu/ObjectCode.cpp, SharedLibrary.cpp): the kernel module
// that the JIT would compile, as an ELF object file and then a shared library's bytes.
#pragma once

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace smelt::codegen::cpu {

/// Translates `module` (LLVM dialect) to LLVM IR, optimizes it as the JIT does (HostMachine.h)
/// and emits position-independent machine code for the host CPU as an object file. The
/// optimized IR goes to `llvmIR` when given. On failure, `error` says what failed.
std::optional<std::vector<char>> emitObjectFile(mlir::ModuleOp module, std::string &error,
                                                std::string *llvmIR = nullptr);

/// Links `object` into a shared library with the system's C++ compiler driver (`c++ -shared`,
/// found on the PATH), in a temporary directory removed afterwards. The library needs only
/// libc and libm at run time. On failure, `error` says what failed (no linker, its messages).
std::optional<std::vector<uint8_t>> linkSharedLibrary(const std::vector<char> &object,
                                                      std::string &error);

} // namespace smelt::codegen::cpu
