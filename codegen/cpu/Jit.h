// The CPU kernels' object files loaded in process (codegen/cpu/Jit.cpp): the one translation unit
// that includes LLVM's JIT, kept apart because it is slow to compile.
#pragma once

#include "runtime/Executable.h"

#include "llvm/ADT/ArrayRef.h"

#include <memory>
#include <string>
#include <vector>

namespace smelt::codegen::cpu {

/// Links `objects` (ObjectCode.h's) into this process with ORC's LLJIT, resolving their libm
/// calls against the process, and looks up `names`: the result's entries follow `names`. On
/// failure, `error` says what failed; a missing symbol is named.
std::shared_ptr<rt::CpuCode> jitLink(const std::vector<std::vector<char>> &objects,
                                     llvm::ArrayRef<std::string> names, std::string &error);

} // namespace smelt::codegen::cpu
