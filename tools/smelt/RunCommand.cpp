// `smelt run`: compile one function of a .mlir module, feed it .npy inputs, run it on the CPU
// and write each result as <name>.npy (or print a summary without --output-dir).
#include "tools/smelt/Commands.h"

#include "codegen/BuildExecutable.h"
#include "codegen/Compile.h"
#include "runtime/CpuExecutor.h"
#include "runtime/Npy.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/WithColor.h"

#include <chrono>
#include <map>

namespace cl = llvm::cl;

namespace smelt::tools {

cl::SubCommand runSubcommand("run", "Compile a function of a .mlir module and run it on the CPU");

static cl::opt<std::string> modelPath(cl::Positional, cl::desc("<model.mlir>"), cl::Required,
                                      cl::sub(runSubcommand), cl::cat(smeltCategory()));
static cl::list<std::string> inputSpecs(
    "input", cl::desc("An argument's value: NAME=FILE.npy, NAME being the argument's "
                      "smelt.name, argN, or its position N"),
    cl::value_desc("name=file.npy"), cl::sub(runSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> outputDir(
    "output-dir", cl::desc("Write each result to DIR/<name>.npy (created if missing)"),
    cl::value_desc("dir"), cl::sub(runSubcommand), cl::cat(smeltCategory()));
static cl::opt<std::string> entryName(
    "entry", cl::desc("Function to run (default: @main, or the only function)"),
    cl::value_desc("name"), cl::sub(runSubcommand), cl::cat(smeltCategory()));

static int fail(const std::string &message) {
  llvm::WithColor::error(llvm::errs(), "smelt") << message << "\n";
  return 1;
}

/// Maps each `--input` to the argument it names; every argument needs exactly one.
static rt::Expected<std::vector<std::string>> inputFiles(mlir::func::FuncOp function) {
  unsigned count = function.getNumArguments();
  std::vector<std::string> files(count);
  for (const std::string &spec : inputSpecs) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return rt::Status::error("--input '" + spec + "' must be NAME=FILE.npy");
    std::string name = spec.substr(0, eq), file = spec.substr(eq + 1);
    std::optional<unsigned> index;
    for (unsigned i = 0; i < count && !index; ++i)
      if (codegen::argumentName(function, i) == name || "arg" + std::to_string(i) == name ||
          std::to_string(i) == name)
        index = i;
    if (!index) {
      std::string names;
      for (unsigned i = 0; i < count; ++i)
        names += (i ? ", " : "") + codegen::argumentName(function, i);
      return rt::Status::error("--input " + spec + ": @" + function.getSymName().str() +
                               " has no argument '" + name + "' (its arguments: " +
                               (names.empty() ? "none" : names) + ")");
    }
    if (!files[*index].empty())
      return rt::Status::error("--input " + spec + ": argument '" + name + "' is given twice");
    files[*index] = file;
  }
  for (unsigned i = 0; i < count; ++i)
    if (files[i].empty())
      return rt::Status::error("missing --input for argument '" +
                               codegen::argumentName(function, i) + "' (#" + std::to_string(i) +
                               ")");
  return files;
}

int runCommand() {
  mlir::MLIRContext context;
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  mlir::OwningOpRef<mlir::ModuleOp> module = codegen::parseModuleFile(context, modelPath);
  if (!module)
    return 1;
  mlir::func::FuncOp function = codegen::findEntry(*module, entryName);
  if (!function)
    return 1;
  rt::Expected<std::vector<std::string>> files = inputFiles(function);
  if (!files)
    return fail(files.message());
  std::vector<std::string> resultNames;
  for (unsigned i = 0; i < function.getNumResults(); ++i)
    resultNames.push_back(codegen::resultName(function, i));

  mlir::FailureOr<rt::Executable> exe = codegen::compile(*module, function.getSymName());
  if (failed(exe))
    return 1;
  std::vector<rt::HostTensor> inputs;
  for (const std::string &file : *files) {
    rt::Expected<rt::HostTensor> tensor = rt::readNpy(file);
    if (!tensor)
      return fail(tensor.message());
    inputs.push_back(std::move(*tensor));
  }
  rt::Expected<rt::CpuExecutor> executor = rt::CpuExecutor::create(*exe);
  if (!executor)
    return fail(executor.message());
  std::vector<rt::HostTensor> outputs;
  auto start = std::chrono::steady_clock::now();
  if (rt::Status s = executor->run(inputs, outputs); !s.ok()) {
    // Name the file behind an input the executor rejected ("input #1 (x): ...").
    std::string message = s.message();
    for (size_t i = 0; i < files->size(); ++i)
      if (message.rfind("input #" + std::to_string(i) + " ", 0) == 0)
        message = (*files)[i] + ": " + message;
    return fail(message);
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count();

  if (!outputDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(outputDir))
      return fail(outputDir + ": cannot create directory: " + ec.message());
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputDir.empty()) {
      llvm::outs() << resultNames[i] << ": " << outputs[i].type().str() << " "
                   << outputs[i].summary() << "\n";
      continue;
    }
    llvm::SmallString<256> path(outputDir);
    llvm::sys::path::append(path, resultNames[i] + ".npy");
    if (rt::Status s = rt::writeNpy(path.str().str(), outputs[i]); !s.ok())
      return fail(s.message());
    llvm::outs() << "wrote " << path << " (" << outputs[i].type().str() << ")\n";
  }
  llvm::errs() << llvm::format("ran @%s: %zu steps in %.3f ms\n",
                               function.getSymName().str().c_str(), exe->steps.size(), ms);
  return 0;
}

} // namespace smelt::tools
