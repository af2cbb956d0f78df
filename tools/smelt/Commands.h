// The subcommands of the smelt driver: each defines its cl::SubCommand and its options in its
// own file and an entry point here.
#pragma once

#include "llvm/Support/CommandLine.h"

#include <string>

namespace smelt::tools {

/// Every option of the driver is in this category; LLVM's own global options are hidden.
llvm::cl::OptionCategory &smeltCategory();

/// Prints "smelt: error: <message>" and returns the exit status 1.
int fail(const std::string &message);

extern llvm::cl::SubCommand runSubcommand;
int runCommand();

extern llvm::cl::SubCommand compileSubcommand;
int compileCommand();

extern llvm::cl::SubCommand trainSubcommand;
int trainCommand();

extern llvm::cl::SubCommand devicesSubcommand;
int devicesCommand();

extern llvm::cl::SubCommand dumpSubcommand;
int dumpCommand();

extern llvm::cl::SubCommand benchSubcommand;
int benchCommand();

extern llvm::cl::SubCommand importSubcommand;
int importCommand();

} // namespace smelt::tools
