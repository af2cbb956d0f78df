// smelt: the driver. Subcommands share one parser (LLVM's cl, as MLIR tools do); each has
// --help. `smelt run` compiles a .mlir function and runs it with .npy inputs.
#include "tools/smelt/Commands.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

namespace smelt::tools {
llvm::cl::OptionCategory &smeltCategory() {
  static llvm::cl::OptionCategory category("smelt options");
  return category;
}

int fail(const std::string &message) {
  llvm::WithColor::error(llvm::errs(), "smelt") << message << "\n";
  return 1;
}
} // namespace smelt::tools

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // libLLVM registers hundreds of backend flags; a user of smelt needs none of them.
  llvm::cl::HideUnrelatedOptions(smelt::tools::smeltCategory());
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "Smelt: a dataflow-graph compiler for training.\n\n"
                                    "  smelt run model.mlir --input x=x.npy --output-dir out\n"
                                    "  smelt compile model.mlir --target=cpu -o model.smelt\n"
                                    "  smelt train --model=mlp --epochs=5\n"
                                    "  smelt devices\n"
                                    "  smelt dump model.mlir --dump-dir smelt-dump\n"
                                    "  smelt bench model.mlir --repeat 20\n");
  if (smelt::tools::runSubcommand)
    return smelt::tools::runCommand();
  if (smelt::tools::compileSubcommand)
    return smelt::tools::compileCommand();
  if (smelt::tools::trainSubcommand)
    return smelt::tools::trainCommand();
  if (smelt::tools::devicesSubcommand)
    return smelt::tools::devicesCommand();
  if (smelt::tools::dumpSubcommand)
    return smelt::tools::dumpCommand();
  if (smelt::tools::benchSubcommand)
    return smelt::tools::benchCommand();
  llvm::WithColor::error(llvm::errs(), "smelt") << "no subcommand given; try `smelt --help`\n";
  return 1;
}
