// Fusions that compute the same thing: a transformer's layers give the same kernels once per
// layer (the GPT train step: 238 fusions, 77 different), and a back end compiles each different
// one once. Two fusions are equivalent when their kinds, block argument types, results written
// in place (smelt.in_place) and bodies (ops, attributes, types, the flow of values) are the same;
// locations and where the inputs come from do not matter, because a kernel reads its buffers
// through its arguments.
#pragma once

#include "ir/SmeltDialect.h"

#include <cstddef>
#include <vector>

namespace smelt::codegen {

/// For each fusion, the index of the first fusion in `fusions` equivalent to it (its own index
/// when none before it is).
std::vector<size_t> firstEquivalentFusions(llvm::ArrayRef<FusionOp> fusions);

} // namespace smelt::codegen
