// smelt: the driver. Subcommands share one parser (LLVM's cl, as MLIR tools do); each has
// --help. `smelt run` compiles a .mlir function and runs it with .npy inputs.
#include "tools/smelt/Commands.h"

#include "runtime/CpuThreads.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

#include <new>

namespace smelt::tools {
llvm::cl::OptionCategory &smeltCategory() {
  static llvm::cl::OptionCategory category("smelt options");
  return category;
}

int fail(const std::string &message) {
  // One write when the line is not coloured: stderr is unbuffered, and under mpirun another
  // process's output (MPI_Abort's banner) could land between "smelt" and ": error: ...".
  if (llvm::errs().has_colors()) {
    llvm::WithColor::error(llvm::errs(), "smelt") << message << "\n";
  } else {
    std::string line;
    llvm::raw_string_ostream text(line);
    llvm::WithColor::error(text, "smelt") << message << "\n";
    llvm::errs() << text.str();
  }
  return 1;
}

/// One count for Smelt's kernels and oneDNN, on every subcommand that runs anything.
static llvm::cl::opt<std::string>
    cpuThreads("cpu-threads",
               llvm::cl::desc("Threads for the CPU kernels and oneDNN (default: "
                              "SMELT_CPU_THREADS, else the CPUs this process may use)"),
               llvm::cl::value_desc("n"), llvm::cl::sub(llvm::cl::SubCommand::getAll()),
               llvm::cl::cat(smeltCategory()));
} // namespace smelt::tools

/// Runs the subcommand the command line chose.
static int dispatch() {
  using namespace smelt::tools;
  if (runSubcommand)
    return runCommand();
  if (compileSubcommand)
    return compileCommand();
  if (trainSubcommand)
    return trainCommand();
  if (devicesSubcommand)
    return devicesCommand();
  if (dumpSubcommand)
    return dumpCommand();
  if (benchSubcommand)
    return benchCommand();
  if (importSubcommand)
    return importCommand();
  return fail("no subcommand given; try `smelt --help`");
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // InitLLVM's new-handler turns a failed allocation into "LLVM ERROR: out of memory" and
  // SIGABRT. Without it operator new throws std::bad_alloc, which the readers catch to name
  // the file or tensor that did not fit, and which main turns into an error otherwise.
  std::set_new_handler(nullptr);
  // libLLVM registers hundreds of backend flags; a user of smelt needs none of them.
  llvm::cl::HideUnrelatedOptions(smelt::tools::smeltCategory());
  llvm::cl::ParseCommandLineOptions(argc, argv,
                                    "Smelt: a dataflow-graph compiler for training.\n\n"
                                    "  smelt run model.mlir --input x=x.npy --output-dir out\n"
                                    "  smelt compile model.mlir --target=cpu -o model.smelt\n"
                                    "  smelt train --model=mlp --epochs=5\n"
                                    "  smelt devices\n"
                                    "  smelt dump model.mlir --dump-dir smelt-dump\n"
                                    "  smelt bench model.mlir --repeat 20\n"
                                    "  smelt import model.onnx -o model.mlir\n");
  if (smelt::tools::cpuThreads.getNumOccurrences()) {
    smelt::rt::Expected<int> threads =
        smelt::rt::parseCpuThreads(smelt::tools::cpuThreads, "--cpu-threads");
    if (!threads)
      return smelt::tools::fail(threads.message());
    smelt::rt::setCpuThreads(*threads);
  }
  try {
    return dispatch();
  } catch (const std::bad_alloc &) {
    return smelt::tools::fail("out of memory (a smaller model, batch or --limit, or more "
                              "memory or address space: `ulimit -v`)");
  }
}
