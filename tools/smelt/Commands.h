// The subcommands of the smelt driver: each defines its cl::SubCommand and its options in its
// own file and an entry point here.
#pragma once

#include "llvm/Support/CommandLine.h"

namespace smelt::tools {

extern llvm::cl::SubCommand runSubcommand;
int runCommand();

} // namespace smelt::tools
