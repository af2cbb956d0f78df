// The CPU kernels' machine code (codegen/cpu/ObjectCode.cpp, SharedLibrary.cpp): a kernel module
// as an ELF object file, which the JIT loads in process (Jit.h) or the system linker makes a
// shared library of for an AOT artifact.
#pragma once

#include "runtime/Trace.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace smelt::codegen::cpu {

/// Another name for a kernel's entry: the kernel of a fusion equivalent to the one compiled
/// (codegen/EquivalentFusions.h) is the same machine code under its own symbol.
struct KernelAlias {
  std::string name;
  std::string kernel;
};

/// Translates `module` (LLVM dialect) to LLVM IR, adds `aliases`, optimizes it at -O3 for the
/// host CPU (HostMachine.h) and emits position-independent machine code as an object file. The
/// optimized IR goes to `llvmIR` when given; the optimization and the machine code are spans on
/// `track` of `trace` when given. On failure, `error` says what failed.
std::optional<std::vector<char>> emitObjectFile(mlir::ModuleOp module,
                                                llvm::ArrayRef<KernelAlias> aliases,
                                                std::string &error, std::string *llvmIR = nullptr,
                                                rt::Trace *trace = nullptr,
                                                const rt::Trace::Track &track = {});

/// Links `objects` into one shared library with the system's C++ compiler driver (`c++
/// -shared`, found on the PATH), in a temporary directory removed afterwards. The library needs
/// only libc and libm at run time. On failure, `error` says what failed (no linker, its
/// messages).
std::optional<std::vector<uint8_t>> linkSharedLibrary(const std::vector<std::vector<char>> &objects,
                                                      std::string &error);

} // namespace smelt::codegen::cpu
