// How many ops of a fused kernel compute something of their own: not the splat constants and
// iotas smelt-fuse copies into every kernel that reads them. A kernel compiled without fusion
// has exactly one.
#pragma once

#include "runtime/Executable.h"

#include <sstream>
#include <string>

namespace smelt::test {

inline int opsBeyondSources(const rt::FusedKernel &kernel) {
  std::istringstream ops(kernel.ops);
  int count = 0;
  for (std::string op; std::getline(ops, op, '+');)
    count += op != "constant" && op != "iota";
  return count;
}

} // namespace smelt::test
